"""Biphasic presets, from *Should We Still Pretrain Encoders with Masked Language Modeling?* (Gisserot-Boukhlef et
al., 2025): its three model sizes pre-trained from scratch, CLM then MLM (PFS, §2 and Appendix A), and MLM continued
from a causal LM (CPT, §5) as the paper runs it, at 610M; and the method's small-run settings (a model built from
scratch without --preset)."""

from ...models.biphasic.configuration_biphasic import PRESETS as SIZES
from ...training.presets import Preset, Sourced, small_run_settings

PAPER = "Gisserot-Boukhlef et al., 2025, §2, §5 and Appendix A"
APPENDIX = "App. A"
MODEL = "hf_encoders.models.biphasic:BiphasicEncoderForPreTraining"
# Appendix A's architecture rows, by the config field each sets.
ARCHITECTURE_ROWS = {
    "num_hidden_layers": "Layers",
    "hidden_size": "Embedding Dimension",
    "intermediate_size": "FFN Dimension",
    "num_attention_heads": "Attention Heads",
    "num_key_value_heads": "Key/Value Heads",
}


def architecture(size: str) -> dict[str, Sourced]:
    column = size.upper()
    return {
        **{
            field: Sourced(value, f"{APPENDIX}, {column}: {ARCHITECTURE_ROWS[field]} {value:,}")
            for field, value in SIZES[size].items()
        },
        "max_position_embeddings": Sourced(2048, f"{APPENDIX}: maximum context length 2,048"),
    }


def schedule(steps: int, decay: int, source: str) -> dict[str, Sourced]:
    """The paper's optimisation (one WSD schedule over the run, AdamW), for a run of `steps` ending in `decay`."""
    return {
        "max_steps": Sourced(steps, source),
        "learning_rate": Sourced(
            5e-4, "§2: the constant rate of the WSD schedule (lost from the paper's extracted text; the authors' code)"
        ),
        "lr_scheduler_type": Sourced("warmup_stable_decay", f"{APPENDIX}: scheduler WSD (linear decay)"),
        "lr_scheduler_kwargs": Sourced(
            {"num_decay_steps": decay, "decay_type": "linear"}, f"{APPENDIX}: decay steps 5%, linear decay"
        ),
        "warmup_steps": Sourced(2000, f"{APPENDIX}: warmup steps 2,000"),
        "adam_beta1": Sourced(0.9, f"{APPENDIX}: Adam β1 0.9"),
        "adam_beta2": Sourced(0.95, f"{APPENDIX}: Adam β2 0.95"),
        "weight_decay": Sourced(0.1, f"{APPENDIX}: weight decay 0.1"),
        "max_grad_norm": Sourced(1.0, f"{APPENDIX}: gradient clipping norm 1.0"),
        "block_size": Sourced(2048, f"{APPENDIX}: maximum context length 2,048"),
        "mlm_probability": Sourced(0.4, "§3: the 40% masking ratio of every later experiment"),
        # The paper's 12 rows per GPU vary in length and average 1,024 tokens (2,359,296 / (12 x 192)); our blocks
        # are full, so half as many make the same tokens.
        "per_device_train_batch_size": Sourced(6, f"{APPENDIX}: per-GPU batch size 12 rows of 1,024 tokens on average"),
    }


# Tokens/Step 2,359,296 = 1,152 full blocks of 2,048 tokens.
BATCH = Sourced(1152, f"{APPENDIX}: tokens/step 2,359,296, in blocks of 2,048")
VOCABULARY = Sourced(128_256, f"{APPENDIX}: vocabulary size 128,256 (the LLaMA 3 tokenizer)")


def from_scratch(size: str) -> Preset:
    return Preset(
        name=f"biphasic-{size}",
        method="biphasic",
        paper=PAPER,
        summary=f"{size.upper()} from scratch, CLM for 25% of 42,000 steps then MLM (PFS)",
        model=MODEL,
        batch_size=BATCH,
        options={
            **schedule(42_000, 2000, "§2: 42,000 training steps, the last 2,000 a linear decay"),
            "phases": Sourced("clm:0.25,mlm:0.75", "§4: the 25%-75% CLM-MLM split"),
            "vocab_size": VOCABULARY,
        },
        config=architecture(size),
    )


CPT = Preset(
    name="biphasic-610m-cpt",
    method="biphasic",
    paper=PAPER,
    summary="610M causal LM continued with MLM for 22,000 steps (CPT)",
    model=MODEL,
    batch_size=BATCH,
    options={
        # 5% of 22,000 steps decay (Appendix A's share).
        **schedule(22_000, 1100, "§5: CPT budgets of 2,000, 12,000 and 22,000 steps, the longest"),
        "phases": Sourced("mlm:1.0", "§5: the pretrained model is continued with MLM"),
    },
    config=architecture("610m"),
    needs={"from_causal_lm": "CPT continues a causal LM (the paper's own 610M CLM model): pass its path"},
)

PRESETS = {preset.name: preset for preset in (*map(from_scratch, SIZES), CPT)}

SMALL_RUNS = {"tiny": small_run_settings(2e-3), "small": small_run_settings(1e-3)}

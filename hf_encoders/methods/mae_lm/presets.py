"""MAE-LM's paper presets, from *Representation Deficiency in Masked Language Modeling* (Meng et al., ICLR 2024):
its three pre-training settings, Appendix C ("Details of Pretraining Settings", "Masking") and Appendix D's Table 3,
and MAE-LM's small-run settings (a model built from scratch without --preset)."""

from ...training.presets import Preset, Sourced, small_run_settings

PAPER = "Meng et al., 2024, MAE-LM, Appendices C and D"
TABLE = "App. D, Table 3"
MODEL = "hf_encoders.models.mae_lm:MaeLmForMaskedLM"


def setting(name: str, column: str, *, steps, rate, buckets, distance, clip, vocab, shape, micro_batch) -> Preset:
    """One column of Table 3 with the architecture and corpus of Appendix C; what all three share is written once."""
    return Preset(
        name=name,
        method="mae_lm",
        paper=PAPER,
        summary=f"the {column} setting: {steps.value:,} steps of 2,048 x 512 tokens",
        model=MODEL,
        batch_size=Sourced(2048, f"{TABLE}: batch size 2048"),
        options={
            "max_steps": steps,
            "learning_rate": rate,
            "warmup_steps": Sourced(10_000, f"{TABLE}: warm-up steps 10K"),
            "lr_scheduler_type": Sourced(
                "linear", "not in the paper: RoBERTa's linear decay to 0, as the settings it follows (App. C)"
            ),
            "block_size": Sourced(512, f"{TABLE}: sequence length 512"),
            "adam_epsilon": Sourced(1e-6, f"{TABLE}: Adam ε 1e-6"),
            "adam_beta1": Sourced(0.9, f"{TABLE}: Adam (β1, β2) (0.9, 0.98)"),
            "adam_beta2": Sourced(0.98, f"{TABLE}: Adam (β1, β2) (0.9, 0.98)"),
            "max_grad_norm": clip,
            "weight_decay": Sourced(0.01, f"{TABLE}: weight decay 0.01"),
            "mlm_probability": Sourced(0.15, "App. C, Masking: 15% random masks"),
            "vocab_size": vocab,
            "per_device_train_batch_size": micro_batch,
        },
        config={
            **shape,
            "decoder_num_hidden_layers": Sourced(4, "App. C: the decoder is a 4-layer Transformer"),
            "relative_attention_num_buckets": buckets,
            "relative_attention_max_distance": distance,
            "hidden_dropout_prob": Sourced(0.1, f"{TABLE}: dropout 0.1"),
            "attention_probs_dropout_prob": Sourced(0.1, f"{TABLE}: dropout 0.1"),
        },
    )


BASE_SHAPE = {
    "hidden_size": Sourced(768, "App. C: model dimension 768"),
    "num_hidden_layers": Sourced(12, "App. C: a 12-layer Transformer"),
    "num_attention_heads": Sourced(12, "not in the paper: BERT-base's 12 heads, the model base follows (App. C)"),
    "intermediate_size": Sourced(3072, "not in the paper: BERT-base's 3,072, the model base follows (App. C)"),
}
LARGE_SHAPE = {
    "hidden_size": Sourced(1024, "App. C: 1,024 model dimensions"),
    "num_hidden_layers": Sourced(24, "App. C: scaling up the encoder to 24 layers"),
    "num_attention_heads": Sourced(16, "not in the paper: RoBERTa-large's 16 heads"),
    "intermediate_size": Sourced(4096, "not in the paper: RoBERTa-large's 4,096"),
}
CASED_VOCABULARY = Sourced(64_000, "App. C: base++ expands the vocabulary to 64,000 cased subword units")

PRESETS = {
    preset.name: preset
    for preset in (
        setting(
            "mae_lm-base",
            "base",
            steps=Sourced(125_000, f"{TABLE}: max steps 125K"),
            rate=Sourced(5e-4, f"{TABLE}: peak learning rate 5e-4"),
            buckets=Sourced(32, f"{TABLE}: relative position encoding buckets 32"),
            distance=Sourced(128, f"{TABLE}: relative position encoding max distance 128"),
            clip=Sourced(2.0, f"{TABLE}: clip norm 2.0"),
            vocab=Sourced(32_768, "App. C: 32,768 uncased subword units (ours: WordPiece, not BPE)"),
            shape=BASE_SHAPE,
            micro_batch=Sourced(64, "not in the paper: a micro-batch that fits an 80 GB GPU"),
        ),
        setting(
            "mae_lm-base++",
            "base++",
            steps=Sourced(2_000_000, f"{TABLE}: max steps 2M"),
            rate=Sourced(2e-4, f"{TABLE}: peak learning rate 2e-4"),
            buckets=Sourced(64, f"{TABLE}: relative position encoding buckets 64"),
            distance=Sourced(128, f"{TABLE}: relative position encoding max distance 128"),
            clip=Sourced(2.0, f"{TABLE}: clip norm 2.0"),
            vocab=CASED_VOCABULARY,
            shape=BASE_SHAPE,
            micro_batch=Sourced(64, "not in the paper: a micro-batch that fits an 80 GB GPU"),
        ),
        setting(
            "mae_lm-large++",
            "large++",
            steps=Sourced(1_000_000, f"{TABLE}: max steps 1M"),
            rate=Sourced(1e-4, f"{TABLE}: peak learning rate 1e-4"),
            buckets=Sourced(128, f"{TABLE}: relative position encoding buckets 128"),
            distance=Sourced(256, f"{TABLE}: relative position encoding max distance 256"),
            clip=Sourced(1.0, f"{TABLE}: clip norm 1.0"),
            vocab=CASED_VOCABULARY,
            shape=LARGE_SHAPE,
            micro_batch=Sourced(32, "not in the paper: a micro-batch that fits an 80 GB GPU"),
        ),
    )
}

# The decoder options that take a small MAE-LM off the plateau are part of its tiny and small sizes (recipe.py), so a
# run that sets its own rate keeps them.
SMALL_RUNS = {"tiny": small_run_settings(2e-3), "small": small_run_settings(5e-4)}

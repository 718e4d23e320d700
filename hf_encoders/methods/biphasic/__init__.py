"""Biphasic CLM -> MLM (*Should We Still Pretrain Encoders with Masked Language Modeling?*, Gisserot-Boukhlef et al.,
2025): one Llama-style network trained first as a causal LM, then as a masked LM, or a causal LM converted and
continued with MLM. Its model is `models/biphasic/`."""

from ..method import Method

METHOD = Method(
    name="biphasic",
    title="Biphasic CLM->MLM",
    model_type="biphasic",
    presets=f"{__name__}.presets:PRESETS",
    small_runs=f"{__name__}.presets:SMALL_RUNS",
    recipe=f"{__name__}.recipe:BiphasicRecipe",
    collator=f"{__name__}.collator:DataCollatorForBiphasic",
    config="hf_encoders.models.biphasic:BiphasicConfig",
    lora_target_modules=("q_proj", "v_proj"),  # Llama's attention, as peft's own llama default
    exporter=f"{__name__}.export:export_biphasic",
    demo_confounds="another architecture (RoPE, RMSNorm, SwiGLU, grouped-query attention) and 40% masking: "
    "its score cannot be credited to the CLM phase, which only a same-architecture MLM-only run isolates",
)

"""MAE-LM (*Representation Deficiency in Masked Language Modeling*, Meng et al., ICLR 2024): the encoder never sees
[MASK]; a shallow decoder, dropped at fine-tuning, predicts the masked tokens. Its model is `models/mae_lm/`."""

from ..method import Method

METHOD = Method(
    name="mae_lm",
    title="MAE-LM",
    model_type="mae_lm",
    presets=f"{__name__}.presets:PRESETS",
    small_runs=f"{__name__}.presets:SMALL_RUNS",
    recipe=f"{__name__}.recipe:MaeLmRecipe",
    collator=f"{__name__}.collator:DataCollatorForMaeLm",
    config="hf_encoders.models.mae_lm:MaeLmConfig",
    lora_target_modules=("q_proj", "v_proj"),  # the pre-training decoder (dropped at fine-tuning) shares them
    export_note="MAE-LM checkpoints need no export: fine-tune them with --trust_remote_code",
    demo_confounds="relative position bias, a decoder with the tiny size's two options the paper's lacks (a locality "
    "bias, larger value projections: without them a tiny decoder learns token frequencies and never reads the "
    "encoder), no loss on unmasked tokens",
)

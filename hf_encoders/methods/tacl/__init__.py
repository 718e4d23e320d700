"""TaCL (*TaCL: Improving BERT Pre-training with Token-aware Contrastive Learning*, Su et al., NAACL 2022 Findings):
a pretrained encoder continued as a student, contrasted token by token with a frozen copy of itself. Its model is
`models/tacl/`; what fine-tuning starts from is the student, a plain checkpoint of the encoder's own type."""

from ..method import Method

METHOD = Method(
    name="tacl",
    title="TaCL",
    model_type="tacl",
    presets=f"{__name__}.presets:PRESETS",
    recipe=f"{__name__}.recipe:TaclRecipe",
    collator=f"{__name__}.collator:DataCollatorForTacl",
    config="hf_encoders.models.tacl:TaclConfig",
    exporter=f"{__name__}.export:export_student",
    demo_continues="mlm",
    demo_confounds="continues the baseline, so it has had twice the pre-training steps of every other row",
)

"""The BERT masked-LM baseline the other methods are measured against (*BERT: Pre-training of Deep Bidirectional
Transformers for Language Understanding*, Devlin et al., NAACL 2019): stock `BertForMaskedLM`, so it has no model
folder of its own."""

from ..method import Method

METHOD = Method(
    name="mlm",
    title="MLM (BERT baseline)",
    model_type="bert",
    small_runs=f"{__name__}.presets:SMALL_RUNS",
    recipe=f"{__name__}.recipe:MlmRecipe",
    collator="hf_encoders.data.reproducible_masking:ReproducibleDataCollatorForLanguageModeling",
)

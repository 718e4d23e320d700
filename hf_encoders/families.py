"""Every pre-training method of hf-encoders, declared once.

One `Family` per method. The CLI (`pretrain --method`), registration with the Auto classes, the demo, LoRA, export,
the bench and the tests' family lists all read this table, so adding a method is a model folder, a collator, a
recipe, a card and one entry here (CONTRIBUTING.md, "Adding a method"). Classes are named as "module:attribute" and
imported when used, so `hf-encoders --help` stays fast and a method's dependencies load only when it runs.
"""

from dataclasses import dataclass
from importlib import import_module


@dataclass(frozen=True)
class Family:
    # The one spelling of the method: `--method`, `model_cards/<name>.md`, `models/<name>/`, the tests' ids.
    name: str
    # How prose names it (the demo's report, messages).
    title: str
    # `model_type` of the checkpoints it writes.
    model_type: str
    recipe: str
    collator: str
    # Our configuration class, whose `default_auto_map` names the model classes to register; None for a method
    # trained on a stock Transformers model (the MLM baseline).
    config: str | None = None
    # Modules LoRA adapts by default (peft's suffix convention); None where peft's own table knows the model type.
    lora_target_modules: tuple[str, ...] | None = None
    # `export(checkpoint, output_dir)` writing a checkpoint that needs no remote code; None where none is needed
    # or possible, and `export_note` says why.
    exporter: str | None = None
    export_note: str = "its checkpoints load without remote code already"
    # In the demo, the family whose freshly trained encoder this method continues (TaCL needs a pretrained one).
    demo_continues: str | None = None
    # What else differs from the demo's MLM baseline row besides the objective: the demo runs each method as it is
    # usually set up, so its table must say which differences confound a comparison (experiments/ controls them).
    demo_confounds: str = "none: this is the baseline"

    @property
    def card_template(self) -> str:
        return self.name


def load(reference: str):
    """The object a "package.module:attribute" reference names."""
    module, _, attribute = reference.partition(":")
    return getattr(import_module(module), attribute)


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            name="mlm",
            title="MLM (BERT baseline)",
            model_type="bert",
            recipe="hf_encoders.training.recipes.mlm:MlmRecipe",
            collator="hf_encoders.data.reproducible_masking:ReproducibleDataCollatorForLanguageModeling",
        ),
        Family(
            name="mae_lm",
            title="MAE-LM",
            model_type="mae_lm",
            recipe="hf_encoders.training.recipes.mae_lm:MaeLmRecipe",
            collator="hf_encoders.data.mae_lm_collator:DataCollatorForMaeLm",
            config="hf_encoders.models.mae_lm:MaeLmConfig",
            lora_target_modules=("q_proj", "v_proj"),  # the pre-training decoder (dropped at fine-tuning) shares them
            export_note="MAE-LM checkpoints need no export: fine-tune them with --trust_remote_code",
            demo_confounds="relative position bias, a decoder, no loss on unmasked tokens; from scratch at this budget "
            "its decoder learns token frequencies before it reads the encoder (the unigram plateau: "
            "experiments/scan/SCAN.md), so its rank says nothing about MAE-LM; continued from a pretrained encoder, "
            "its decoder reads the encoder (experiments/REPORT.md, M from a pretrained start)",
        ),
        Family(
            name="tacl",
            title="TaCL",
            model_type="tacl",
            recipe="hf_encoders.training.recipes.tacl:TaclRecipe",
            collator="hf_encoders.data.tacl_collator:DataCollatorForTacl",
            config="hf_encoders.models.tacl:TaclConfig",
            exporter="hf_encoders.export:export_student",
            demo_continues="mlm",
            demo_confounds="continues the baseline, so it has had twice the pre-training steps of every other row",
        ),
        Family(
            name="biphasic",
            title="Biphasic CLM->MLM",
            model_type="biphasic",
            recipe="hf_encoders.training.recipes.biphasic:BiphasicRecipe",
            collator="hf_encoders.data.biphasic_collator:DataCollatorForBiphasic",
            config="hf_encoders.models.biphasic:BiphasicConfig",
            lora_target_modules=("q_proj", "v_proj"),  # Llama's attention, as peft's own llama default
            exporter="hf_encoders.export:export_biphasic",
            demo_confounds="another architecture (RoPE, RMSNorm, SwiGLU, grouped-query attention) and 40% masking: "
            "its score cannot be credited to the CLM phase, which only a same-architecture MLM-only run isolates",
        ),
    )
}


def get_family(name: str) -> Family:
    """The family `--method NAME` names; `mae-lm` is read as `mae_lm`, since command lines favour hyphens."""
    family = FAMILIES.get(name.replace("-", "_"))
    if family is None:
        raise ValueError(f"Unknown --method {name!r}; choose one of {', '.join(FAMILIES)}.")
    return family


def family_of_model_type(model_type: str | None) -> Family | None:
    return next((family for family in FAMILIES.values() if family.model_type == model_type), None)

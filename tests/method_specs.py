"""One test specification per method of hf_encoders.methods: what the method-wide tests need to know about a method
that its `Method` entry does not say. tests/test_methods.py fails for a method without one, naming what to add.

The method-wide tests read it: the remote-code round trip, strict loading, the bad-input catalogue, safetensors
checkpoints and Hub uploads (`tiny_config`, through TINY_CONFIGS, PRETRAINING_METHODS and `pretraining_model`),
test_peft.py (`lora`), test_training_features.py (`dropout_free_model`), test_stock_scripts.py
(`stock_checkpoints`), test_resume.py and distributed_worker.py (`tiny_run_options`, `dropout_fields`, `fsdp`),
test_bad_input.py (`missing_mask_fix`), test_pretrain_options.py and test_methods.py (`own_options`,
`continues_encoder`).
"""

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import torch
from accelerate.utils import FullyShardedDataParallelPlugin
from accelerate.utils.fsdp_utils import fsdp2_prepare_auto_wrap_policy
from torch import nn
from transformers import AutoModelForSequenceClassification, BertConfig, PreTrainedConfig, TrainingArguments

from hf_encoders import (
    BiphasicEncoderForPreTraining,
    BiphasicEncoderForSequenceClassification,
    MaeLmForMaskedLM,
    MaeLmForSequenceClassification,
    TaclForPreTraining,
)
from hf_encoders_cli import main as cli_main
from tests.helpers import auto_map_classes
from tests.tiny_models import (
    BERT_SHAPE,
    tiny_biphasic_config,
    tiny_mae_lm_config,
    tiny_modernbert_config,
    tiny_tacl_config,
)

EXAMPLES = Path(__file__).parent.parent / "examples"

# BERT's dropout fields, which MAE-LM's config shares. Llama's (biphasic) `attention_dropout` is 0.0 already.
BERT_DROPOUT = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def without_dropout(fields: tuple[str, ...]) -> dict[str, float]:
    return dict.fromkeys(fields, 0.0)


@dataclass(frozen=True)
class LoraSpec:
    # The method's sequence classifier with `num_labels` labels (a scratch folder for what must be saved first).
    classifier: Callable[[Path, int], nn.Module]
    # The head `lora_config` leaves to modules_to_save.
    head: tuple[str, ...]
    # The encoder modules peft's "all-linear" adapts (the names docs/lora.md lists).
    all_linear: tuple[str, ...]
    # A rate at which 20 steps learn tests/test_peft.py's toy task.
    learning_rate: float


@dataclass(frozen=True)
class FsdpVariant:
    # The tiny model, dropout-free and the same on every rank once seeded.
    model: Callable[[], nn.Module]
    # The example FSDP config it trains with (examples/<file>). The generic one names no layer class, so accelerate
    # wraps the model's `_no_split_modules`; a model whose `_no_split_modules` include its embeddings (BERT,
    # ModernBERT: accelerate shards the input embeddings again, and fails) needs a file naming its layers.
    config_file: str = "fsdp.json"


@dataclass(frozen=True)
class MethodSpec:
    # Config fields that switch dropout off, zeroed where runs must agree exactly (for TaCL, its student's).
    dropout_fields: tuple[str, ...]
    # The method's tiny config (keyword overrides go to the config); None for a method trained on a stock
    # Transformers model. The method-wide tests build every class of its auto_map from it.
    tiny_config: Callable[..., PreTrainedConfig] | None = None
    # The objectives its pre-training model trains (its `objective` attribute), where it trains several.
    objectives: tuple[str, ...] = ()
    # The tiny pre-training model without dropout (checkpointing recomputes the same function); None for a method
    # trained on a stock Transformers model.
    dropout_free_model: Callable[[], nn.Module] | None = None
    # `pretrain` continues a pretrained encoder (--model_name_or_path) rather than building one from a config.
    continues_encoder: bool = False
    # Further `PretrainArguments` of the tiny resume and distributed runs.
    run_options: dict = field(default_factory=dict)
    # The `pretrain` options only some methods read that this one reads when set alone, stated here independently of
    # its recipe's `options` (tests/test_pretrain_options.py checks the two agree).
    own_options: tuple[str, ...] = ()
    # What the collator's error says to do when the tokenizer has no mask token (a regular expression).
    missing_mask_fix: str | None = None
    lora: LoraSpec | None = None
    # The pre-training checkpoint (model + tokenizer) in `root` and the runs tests/test_stock_scripts.py's child does
    # on it: (name, path, trust_remote_code, tasks, expected model class prefix, module prefix).
    stock_checkpoints: Callable[[object, Path], list[tuple]] | None = None
    # name -> the FSDP2 setup tests/distributed_worker.py trains.
    fsdp: dict[str, FsdpVariant] = field(default_factory=dict)


# ---- builders ----


def mae_lm_without_dropout() -> nn.Module:
    return MaeLmForMaskedLM(tiny_mae_lm_config(**without_dropout(BERT_DROPOUT)))


def tacl_without_dropout() -> nn.Module:
    return TaclForPreTraining(tiny_tacl_config(BertConfig(**BERT_SHAPE, **without_dropout(BERT_DROPOUT))))


def biphasic_clm() -> nn.Module:
    model = BiphasicEncoderForPreTraining(tiny_biphasic_config())
    model.objective = "clm"
    return model


def tacl_student_classifier(tmp_path: Path, num_labels: int) -> nn.Module:
    """TaCL's deliverable: the student saved as a plain BERT checkpoint, fine-tuned as a stock BERT classifier."""
    TaclForPreTraining(tiny_tacl_config()).save_student(tmp_path / "student")
    return AutoModelForSequenceClassification.from_pretrained(tmp_path / "student", num_labels=num_labels)


def special_ids(tokenizer) -> dict:
    return dict(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)


def mae_lm_stock_checkpoints(tokenizer, root: Path) -> list[tuple]:
    pretrained = root / "mae_lm"
    model = MaeLmForMaskedLM(tiny_mae_lm_config(**special_ids(tokenizer), mask_token_id=tokenizer.mask_token_id))
    model.save_pretrained(pretrained)
    tokenizer.save_pretrained(pretrained)
    return [("mae_lm", pretrained, True, ("glue", "qa", "ner", "mlm"), "MaeLmFor", "transformers_modules.")]


def biphasic_stock_checkpoints(tokenizer, root: Path) -> list[tuple]:
    pretrained = root / "biphasic"
    config = tiny_biphasic_config(
        **special_ids(tokenizer),
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        mask_token_id=tokenizer.mask_token_id,
    )
    BiphasicEncoderForPreTraining(config).save_pretrained(pretrained)
    tokenizer.save_pretrained(pretrained)
    # `hf-encoders export` to native EuroBERT: sequence and token classification without remote code.
    assert cli_main(["export", str(pretrained), str(root / "eurobert")]) == 0
    return [
        ("biphasic", pretrained, True, ("glue", "qa", "ner", "mlm"), "BiphasicEncoderFor", "transformers_modules."),
        ("eurobert", root / "eurobert", False, ("glue", "ner", "mlm"), "EuroBertFor", "transformers.models.eurobert."),
    ]


def tacl_stock_checkpoints(tokenizer, root: Path) -> list[tuple]:
    pretrained = root / "tacl"
    student = BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        **special_ids(tokenizer),
    )
    TaclForPreTraining(tiny_tacl_config(student_config=student)).save_pretrained(pretrained)
    tokenizer.save_pretrained(pretrained)
    assert cli_main(["export", str(pretrained), str(root / "student")]) == 0  # `hf-encoders export CKPT OUT`
    return [
        ("tacl_student", root / "student", False, ("glue", "qa", "ner", "mlm"), "BertFor", "transformers.models.bert.")
    ]


# ---- the table ----

METHOD_SPECS: dict[str, MethodSpec] = {
    "mlm": MethodSpec(dropout_fields=BERT_DROPOUT),
    "mae_lm": MethodSpec(
        dropout_fields=BERT_DROPOUT,
        tiny_config=tiny_mae_lm_config,
        dropout_free_model=mae_lm_without_dropout,
        own_options=("pack_documents", "mask_in_encoder_fraction", "init_from_smaller"),
        missing_mask_fix=r"add_special_tokens\(\{'mask_token'",
        lora=LoraSpec(
            classifier=lambda tmp_path, num_labels: MaeLmForSequenceClassification(
                tiny_mae_lm_config(num_labels=num_labels)
            ),
            head=("classifier",),
            all_linear=("intermediate", "k_proj", "o_proj", "output", "q_proj", "v_proj"),
            learning_rate=2e-2,
        ),
        stock_checkpoints=mae_lm_stock_checkpoints,
        fsdp={"mae_lm": FsdpVariant(mae_lm_without_dropout)},
    ),
    "tacl": MethodSpec(
        dropout_fields=BERT_DROPOUT,
        tiny_config=tiny_tacl_config,
        dropout_free_model=tacl_without_dropout,
        continues_encoder=True,
        own_options=(
            "tacl_temperature",
            "tacl_loss_weight",
            "mlm_loss_weight",
            "nsp_loss_weight",
            "use_nsp",
            "exclude_padding_from_contrast",
        ),
        missing_mask_fix="use the tokenizer of the encoder TaCL continues",
        lora=LoraSpec(
            classifier=tacl_student_classifier,
            head=("classifier",),
            all_linear=("dense", "key", "query", "value"),
            # BERT's classifier reads the frozen tanh pooler, whose untrained outputs are small: it needs a larger
            # step to learn the toy task in 20 steps; the biphasic model diverges at that rate.
            learning_rate=5e-2,
        ),
        stock_checkpoints=tacl_stock_checkpoints,
        fsdp={
            # ModernBERT has no dropout by default.
            "tacl-modernbert": FsdpVariant(
                lambda: TaclForPreTraining(tiny_tacl_config(tiny_modernbert_config())),
                config_file="fsdp_tacl_modernbert.json",
            ),
            "tacl-bert": FsdpVariant(tacl_without_dropout, config_file="fsdp_bert.json"),
        },
    ),
    "biphasic": MethodSpec(
        dropout_fields=(),
        tiny_config=tiny_biphasic_config,
        objectives=("clm", "mlm"),
        dropout_free_model=lambda: BiphasicEncoderForPreTraining(tiny_biphasic_config()),
        run_options={"phases": "clm:0.5,mlm:0.5"},  # the switch comes before resume's kill, at step 2 of 4 in DDP
        own_options=("pack_documents", "from_causal_lm", "phases", "init_from_smaller"),
        missing_mask_fix=r"add_special_tokens\(\{'mask_token'.*prepare_tokenizer",
        lora=LoraSpec(
            classifier=lambda tmp_path, num_labels: BiphasicEncoderForSequenceClassification(
                tiny_biphasic_config(num_labels=num_labels)
            ),
            head=("dense", "classifier"),
            all_linear=("down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"),
            learning_rate=2e-2,
        ),
        stock_checkpoints=biphasic_stock_checkpoints,
        fsdp={"biphasic": FsdpVariant(biphasic_clm)},
    ),
}

# What a method with a model folder must specify: the method-wide tests would skip it silently otherwise.
MODEL_METHOD_FIELDS = ("tiny_config", "dropout_free_model", "missing_mask_fix", "lora", "stock_checkpoints", "fsdp")

# The tiny config of every method with a model folder: the remote-code round trip covers all of its classes.
TINY_CONFIGS = {name: spec.tiny_config for name, spec in METHOD_SPECS.items() if spec.tiny_config}
# The method-wide tests' variants: each method of TINY_CONFIGS, or one variant per objective where its pre-training
# model trains several (biphasic's `objective` attribute).
PRETRAINING_METHODS = tuple(
    f"{name}-{objective}" if objective else name
    for name in TINY_CONFIGS
    for objective in METHOD_SPECS[name].objectives or (None,)
)


def specs_with(field_name: str) -> list[str]:
    """The methods whose spec sets `field_name`, in the method table's order: a method-wide test's parameters."""
    return [name for name, spec in METHOD_SPECS.items() if getattr(spec, field_name)]


def built_from_scratch() -> list[str]:
    """The methods `pretrain` builds from a config (so `--model_size` and friends apply), not from an encoder."""
    return [name for name, spec in METHOD_SPECS.items() if not spec.continues_encoder]


def tiny_run_options(method: str, init: str, *, dropout: bool = True) -> dict:
    """`PretrainArguments` options of a tiny run of `method`: TaCL continues the BERT at `init`, the others build a
    one-layer model from scratch with the tokenizer saved in `init` (one tokenizer for every run)."""
    spec = METHOD_SPECS[method]
    if spec.continues_encoder:
        return {"model_name_or_path": init, **spec.run_options}
    overrides = ["num_hidden_layers=1", *([] if dropout else [f"{name}=0.0" for name in spec.dropout_fields])]
    return {"tokenizer_name": init, "config_overrides": ",".join(overrides), **spec.run_options}


def pretraining_model(method: str, **overrides):
    """The pre-training model (its config's AutoModelForPreTraining class) of a method in PRETRAINING_METHODS, set to
    the method's objective; `overrides` go to the tiny config."""
    name, _, objective = method.partition("-")
    config = TINY_CONFIGS[name](**overrides)
    model = dict(auto_map_classes(config))["AutoModelForPreTraining"](config)
    if objective:
        model.objective = objective
    return model


def tiny_pretraining_model(method: str):
    """The seeded tiny pre-training model of a method in PRETRAINING_METHODS; TaCL at the paper's temperature 0.01."""
    torch.manual_seed(0)
    return pretraining_model(method, **({"temperature": 0.01} if method == "tacl" else {}))


def fsdp_variants() -> dict[str, FsdpVariant]:
    return {name: variant for spec in METHOD_SPECS.values() for name, variant in spec.fsdp.items()}


def fsdp_wrap_classes(model: nn.Module) -> list[str]:
    """The model's layer classes: its `_no_split_modules` (what accelerate's FSDP wraps when the config names no
    class) less the embeddings, which accelerate's fsdp2 shards on their own or with the output head instead."""
    return sorted(name for name in model._no_split_modules if not name.endswith("Embeddings"))


def accelerate_wrap_classes(config_file: str, model: nn.Module) -> list[str]:
    """The layer classes accelerate's FSDP2 wraps in `model` given examples/<config_file> as Trainer passes it on
    (`--fsdp --fsdp_config`): its `transformer_layer_cls_to_wrap`, else the model's `_no_split_modules`."""
    with mock.patch.dict(os.environ):  # both export FSDP settings to the environment: keep them out of other runs
        arguments = TrainingArguments(fsdp=True, fsdp_config=str(EXAMPLES / config_file), report_to="none")
        plugin = FullyShardedDataParallelPlugin(**arguments.fsdp_plugin_args)
    policy = fsdp2_prepare_auto_wrap_policy(plugin, model)
    return sorted({type(module).__name__ for module in model.modules() if policy(module)})

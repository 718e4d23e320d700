"""The method table (hf_encoders.methods) declares each method once; the package's parts are found through it, and
the package stays what its checkpoints and dependencies promise: conversion outside the model folders, peft optional."""

import re

import pytest
import torch
from datasets import Dataset
from transformers import DataCollatorForLanguageModeling

from hf_encoders.methods import METHODS, get_method, load
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.cards import TEMPLATES
from hf_encoders.training.pretrain import main as pretrain
from hf_encoders.training.recipe import Recipe, get_recipe
from tests.helpers import fresh_interpreter
from tests.method_specs import (
    METHOD_SPECS,
    MODEL_METHOD_FIELDS,
    TINY_CONFIGS,
    accelerate_wrap_classes,
    built_from_scratch,
    fsdp_variants,
    fsdp_wrap_classes,
)
from tests.tiny_models import sample_batch, tiny_biphasic_config, tiny_tokenizer

MODEL_METHODS = [name for name, method in METHODS.items() if method.config is not None]


@pytest.mark.parametrize("name", list(METHODS))
def test_every_entry_names_a_recipe_a_collator_and_a_card(name):
    method = METHODS[name]
    recipe = get_recipe(name)
    assert isinstance(recipe, Recipe) and recipe.method is method
    collator = load(method.collator)(tiny_tokenizer(), seed=0)
    assert isinstance(collator, DataCollatorForLanguageModeling)
    batch = collator([{"input_ids": [2, *range(5, 25), 3]}] * 2)
    assert (batch[next(key for key in ("mlm_labels", "labels") if key in batch)] != -100).any(), "it masks"
    assert (TEMPLATES / f"{method.card_template}.md").exists()
    if method.config is not None:
        assert load(method.config).model_type == method.model_type


def test_every_method_with_a_model_has_a_tiny_config_for_the_method_wide_tests():
    # The remote-code round trip, strict loading and the bad-input catalogue iterate TINY_CONFIGS: a method missing
    # there would silently go untested.
    assert sorted(TINY_CONFIGS) == sorted(MODEL_METHODS)


@pytest.mark.parametrize("name", list(METHODS))
def test_every_method_has_a_test_specification(name):
    # The method-wide tests read tests/method_specs.py: a method missing there, or missing a part of it, would
    # silently go untested by them.
    assert name in METHOD_SPECS, (
        f"the {name!r} method has no test specification: add METHOD_SPECS[{name!r}] = MethodSpec(...) to "
        "tests/method_specs.py"
    )
    if METHODS[name].config is not None:
        missing = [field for field in MODEL_METHOD_FIELDS if not getattr(METHOD_SPECS[name], field)]
        assert not missing, f"METHOD_SPECS[{name!r}] in tests/method_specs.py needs {', '.join(missing)}"


@pytest.mark.parametrize("variant", sorted(fsdp_variants()))
def test_the_example_fsdp_configs_wrap_the_models_no_split_layers(variant):
    """What accelerate wraps with the variant's examples/fsdp*.json (the generic one: the model's
    `_no_split_modules`) is the model's layers, and not its embeddings."""
    spec = fsdp_variants()[variant]
    model = spec.model()
    assert accelerate_wrap_classes(spec.config_file, model) == fsdp_wrap_classes(model)


def test_a_method_is_named_one_way_and_the_hyphen_is_read_as_underscore():
    assert get_method("mae-lm") is get_method("mae_lm") is METHODS["mae_lm"]
    with pytest.raises(ValueError, match=rf"Unknown --method 'bert'; choose one of {', '.join(METHODS)}\.$"):
        get_method("bert")


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--method", "tacl", "--init", "x"], "--init was split in two: --model_name_or_path .* --from_causal_lm"),
        (["--method", "mae_lm", "--from_causal_lm", "x"], "--from_causal_lm converts a causal LM for the biphasic"),
        (["--method", "tacl"], "TaCL continues a pretrained encoder: pass --model_name_or_path"),
        (
            ["--method", "biphasic", "--from_causal_lm", "x", "--model_name_or_path", "y"],
            "Pass one starting point: --from_causal_lm .* or --model_name_or_path",
        ),
    ],
    ids=["init", "causal-lm-for-mae_lm", "tacl-without-encoder", "two-starting-points"],
)
def test_starting_points_are_refused_before_the_corpus_is_read(argv, message, tmp_path, capsys):
    argv = [*argv, "--output_dir", str(tmp_path / "out"), "--report_to", "none", "--corpus", str(tmp_path / "none")]
    with pytest.raises((ValueError, SystemExit)) as raised:
        pretrain(argv)
    # argparse reports on stderr and exits; our checks raise ValueError (a missing corpus would be a CorpusError).
    text = str(raised.value) if raised.type is ValueError else capsys.readouterr().err
    assert re.search(message, text), text


BLOCK_HF_ENCODERS = """
import sys
sys.modules["hf_encoders"] = None  # as where hf-encoders is not installed
import transformers
model = transformers.AutoModelForPreTraining.from_pretrained(sys.argv[1], trust_remote_code=True)
try:
    type(model).from_causal_lm(sys.argv[1])
except ImportError as error:
    print(error)
"""


def test_checkpoints_carry_the_model_not_the_conversion(tmp_path):
    """The biphasic folder every checkpoint carries loads and runs without the package, and conversion, which lives
    in the package, says so there instead of failing on an import deep inside."""
    from hf_encoders import BiphasicEncoderForPreTraining

    BiphasicEncoderForPreTraining(tiny_biphasic_config()).save_pretrained(tmp_path / "biphasic")
    result = fresh_interpreter(BLOCK_HF_ENCODERS, [str(tmp_path / "biphasic")], tmp_path)
    assert result.returncode == 0, result.stderr
    assert (
        "Conversion from a causal LM is a tool of the hf-encoders package: `pip install hf-encoders`" in result.stdout
    )


NO_PEFT = """
import sys
sys.modules["peft"] = None  # as where the `lora` extra is not installed
import hf_encoders
print("imported")
try:
    hf_encoders.lora_config(hf_encoders.MaeLmForSequenceClassification(hf_encoders.MaeLmConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
        decoder_num_hidden_layers=1, relative_attention_num_buckets=8, mask_token_id=4)))
except ImportError as error:
    print("lora_config:", error)
"""


def test_peft_is_needed_for_lora_only(tmp_path):
    result = fresh_interpreter(NO_PEFT, [], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == [
        "imported",
        'lora_config: LoRA needs peft: pip install "hf-encoders[lora]"',
    ]


def test_the_phase_is_an_attribute_of_the_model_never_of_its_config(tmp_path):
    from hf_encoders import BiphasicEncoderForPreTraining

    model = BiphasicEncoderForPreTraining(tiny_biphasic_config()).eval()
    batch = sample_batch()
    with torch.no_grad():
        causal = model(**batch, objective="clm").logits
        model.objective = "clm"  # what PhaseScheduleCallback does each step
        torch.testing.assert_close(model(**batch).logits, causal)
    model.save_pretrained(tmp_path)
    assert "objective" not in (tmp_path / "config.json").read_text()
    assert BiphasicEncoderForPreTraining.from_pretrained(tmp_path).objective == "mlm"


@pytest.mark.parametrize("name", built_from_scratch())
def test_continuing_a_checkpoint_reads_its_own_tokenizer(name, tmp_path):
    """--model_name_or_path: the checkpoint's embeddings read its tokenizer's ids, so no new one is trained."""
    saved = tiny_tokenizer()
    saved.save_pretrained(tmp_path)
    args = PretrainArguments(method=name, model_name_or_path=str(tmp_path))
    documents = Dataset.from_dict({"text": ["Words that a trained tokenizer would turn into its own vocabulary."] * 8})
    tokenizer = get_recipe(name).build_tokenizer(args, documents)
    assert tokenizer.convert_tokens_to_ids(["w5", "w63"]) == [5, 63]

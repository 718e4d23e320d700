"""The bad-input catalogue: every input a user can get wrong, per method where it applies, must raise a
`ValueError` (or a subclass) whose message names the problem AND the fix; legal but awkward batches must give a
finite loss and finite gradients.

Covered elsewhere, not repeated here:
* `from_causal_lm` on GPT-2, BERT or a mixture-of-experts model (Mixtral), from a config folder or a loaded model:
  tests/test_biphasic.py::test_unrepresentable_architectures_are_refused_before_loading_weights and
  ::test_a_loaded_gpt2_is_refused;
* an empty corpus, a missing corpus file, undecodable bytes, a wrong text column: tests/test_corpus.py.
"""

import re
import shutil

import pytest
import torch
from safetensors.torch import load_file
from transformers import (
    BertConfig,
    BertForPreTraining,
    GPT2Config,
    GPT2LMHeadModel,
    RobertaConfig,
)

from hf_encoders import (
    BiphasicConfig,
    BiphasicEncoder,
    BiphasicEncoderForMaskedLM,
    BiphasicEncoderForPreTraining,
    DataCollatorForBiphasic,
    MaeLmForMaskedLM,
    MaeLmModel,
    PhaseScheduleCallback,
    TaclConfig,
    TaclForPreTraining,
)
from hf_encoders.methods import METHODS, load
from hf_encoders.methods.biphasic.collator import next_token_labels
from hf_encoders.training.pretrain import check_mask_token
from tests.method_specs import METHOD_SPECS, PRETRAINING_METHODS, TINY_CONFIGS, pretraining_model, specs_with
from tests.tiny_models import (
    MASK_TOKEN_ID,
    VOCAB_SIZE,
    extra_inputs,
    sample_batch,
    tiny_biphasic_config,
    tiny_llama,
    tiny_mae_lm_config,
    tiny_tacl_config,
    tiny_tokenizer,
)


def tokenizer_without_mask():
    tokenizer = tiny_tokenizer()
    tokenizer.mask_token = None
    assert tokenizer.mask_token_id is None
    return tokenizer


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One saved pre-training checkpoint per method (seeded, so reruns write the same weights)."""
    folders = {}
    for method in TINY_CONFIGS:
        torch.manual_seed(0)
        folders[method] = tmp_path_factory.mktemp(method)
        pretraining_model(method).save_pretrained(folders[method])
    return folders


# --- tokenizer and [MASK] -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", specs_with("missing_mask_fix"))
def test_collators_refuse_a_tokenizer_without_mask_token(method):
    with pytest.raises(ValueError, match=f"has no mask token.*{METHOD_SPECS[method].missing_mask_fix}"):
        load(METHODS[method].collator)(tokenizer_without_mask())


def test_the_biphasic_clm_collator_needs_no_mask_token():
    batch = DataCollatorForBiphasic(tokenizer_without_mask(), objective="clm")([[5, 6, 7], [8, 9]])
    assert batch["labels"].tolist() == [[6, 7, -100], [9, -100, -100]]


# The methods whose config records the [MASK] id (TaCL masks with its tokenizer's).
CONFIGS_WITH_MASK_ID = [name for name, config in TINY_CONFIGS.items() if hasattr(config(), "mask_token_id")]


@pytest.mark.parametrize("method", CONFIGS_WITH_MASK_ID)
@pytest.mark.parametrize("tokenizer_mask", ["other id", "none"])
def test_config_and_tokenizer_must_agree_on_the_mask_id(method, tokenizer_mask):
    model = pretraining_model(method, mask_token_id=MASK_TOKEN_ID + 3)
    tokenizer = tiny_tokenizer() if tokenizer_mask == "other id" else tokenizer_without_mask()
    message = (
        rf"config.mask_token_id \({MASK_TOKEN_ID + 3}\) differs.*set config.mask_token_id = tokenizer.mask_token_id"
    )
    with pytest.raises(ValueError, match=message):
        check_mask_token(model, tokenizer)
    model.config.mask_token_id = tokenizer.mask_token_id
    check_mask_token(model, tokenizer)  # the fix the message names is enough


def test_mae_lm_needs_a_mask_token_id():
    with pytest.raises(ValueError, match="mask_token_id is None; set it to the tokenizer's mask_token_id"):
        MaeLmForMaskedLM(tiny_mae_lm_config(mask_token_id=None))


@pytest.mark.parametrize("model_class", [BiphasicEncoderForPreTraining, BiphasicEncoderForMaskedLM])
def test_biphasic_masked_lm_training_needs_a_mask_token_id(model_class):
    model = model_class(tiny_biphasic_config(mask_token_id=None))
    batch = sample_batch()
    labels = torch.where(batch["input_ids"] == MASK_TOKEN_ID, 7, -100)
    with pytest.raises(
        ValueError,
        match=r"needs config.mask_token_id.*add_special_tokens.*resize_token_embeddings.*config.mask_token_id = ",
    ):
        model(**batch, labels=labels)
    assert model(**batch).logits.shape[-1] == VOCAB_SIZE  # inference needs no mask id
    if model_class is BiphasicEncoderForPreTraining:  # nor does the CLM phase of a converted causal LM
        clm_labels = next_token_labels(batch["input_ids"], batch["attention_mask"])
        assert torch.isfinite(model(**batch, labels=clm_labels, objective="clm").loss)


# --- shapes ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", PRETRAINING_METHODS)
def test_a_sequence_longer_than_the_position_table_is_refused(method):
    model = pretraining_model(method).eval()
    ids = torch.full((1, 65), 5)  # the tiny tables hold 64 positions
    with pytest.raises(ValueError, match=r"Sequence length 65 exceeds .*max_position_embeddings=64.*truncat"):
        model(input_ids=ids, labels=ids, **extra_inputs(method, 1))
    with torch.no_grad():
        assert torch.isfinite(model(input_ids=ids[:, :64]).logits).all()  # the limit itself is fine


@pytest.mark.parametrize("model_class", [MaeLmModel, BiphasicEncoder])
def test_the_bare_encoders_refuse_a_sequence_longer_than_the_position_table(model_class):
    config = (tiny_mae_lm_config if model_class is MaeLmModel else tiny_biphasic_config)(max_position_embeddings=8)
    with pytest.raises(ValueError, match="Sequence length 9 exceeds max_position_embeddings=8; truncate"):
        model_class(config)(input_ids=torch.full((1, 9), 5))


def test_a_roberta_student_counts_its_position_offset():
    """RoBERTa's positions start after the padding index: 80 embeddings with pad 1 hold 78 tokens."""
    student = RobertaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=80,
        pad_token_id=1,
        type_vocab_size=1,
    )
    model = TaclForPreTraining(tiny_tacl_config(student)).eval()
    with pytest.raises(
        ValueError, match=r"Sequence length 79 exceeds the roberta student's position table.*at most 78"
    ):
        model(input_ids=torch.full((1, 79), 5))
    with torch.no_grad():
        assert torch.isfinite(model(input_ids=torch.full((1, 78), 5)).logits).all()


@pytest.mark.parametrize("method", [*PRETRAINING_METHODS, "biphasic-masked-lm"])
@pytest.mark.parametrize("shape", [(2, 5), (24,), (1, 12)], ids=["shorter", "flat", "fewer rows"])
def test_labels_of_the_wrong_shape_are_refused(method, shape):
    batch = sample_batch()  # (2, 12)
    labels = torch.full(shape, 7)
    if method == "biphasic-masked-lm":
        model = BiphasicEncoderForMaskedLM(tiny_biphasic_config())
    else:
        model = pretraining_model(method)
    message = r"labels must have the shape of the input \(batch, length\) = \(2, 12\), got \(.*\): one target per"
    with pytest.raises(ValueError, match=message):
        model(**batch, labels=labels, **extra_inputs(method, 2))


# --- configurations -------------------------------------------------------------------------------------------------

BERT_STUDENT = dict(vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=1, intermediate_size=64)


@pytest.mark.parametrize(
    "build,message",
    [
        (
            lambda: tiny_mae_lm_config(num_attention_heads=5),
            "hidden_size/num_attention_heads: 32 is not divisible by 5",
        ),
        (
            lambda: tiny_mae_lm_config(decoder_num_attention_heads=3),
            "decoder_hidden_size/decoder_num_attention_heads: 32 is not divisible by 3",
        ),
        (
            lambda: tiny_biphasic_config(num_attention_heads=5, num_key_value_heads=5),
            r"hidden_size \(32\) is not divisible by num_attention_heads \(5\)",
        ),
        (
            lambda: tiny_biphasic_config(num_attention_heads=3, num_key_value_heads=3),
            r"hidden_size \(32\) is not divisible by num_attention_heads \(3\)",
        ),
        (
            lambda: tiny_tacl_config(BertConfig(**BERT_STUDENT, num_attention_heads=5)),
            r"student_config: hidden_size \(32\) is not divisible by num_attention_heads \(5\)",
        ),
        (
            lambda: TaclConfig(student_config={"model_type": "bert", **BERT_STUDENT, "num_attention_heads": 3}),
            r"student_config: hidden_size \(32\) is not divisible by num_attention_heads \(3\)",
        ),
    ],
    ids=["mae_lm", "mae_lm-decoder", "biphasic-odd-head-dim", "biphasic-even-head-dim", "tacl", "tacl-from-dict"],
)
def test_heads_that_do_not_divide_the_hidden_size_are_refused_by_the_config(build, message):
    # BertConfig alone accepts such a student; BERT's attention only fails once the model is built.
    with pytest.raises(ValueError, match=f"{message}.*pick a head count that divides it"):
        build()


def test_an_explicit_biphasic_head_dim_need_not_divide_the_hidden_size():
    """Mistral-style checkpoints set head_dim themselves; that stays legal (and survives a save)."""
    config = tiny_biphasic_config(num_attention_heads=3, num_key_value_heads=3, head_dim=8)
    model = BiphasicEncoderForPreTraining(config)
    assert model.model.layers[0].self_attn.q_proj.out_features == 24
    assert BiphasicConfig.from_dict(config.to_dict()).head_dim == 8


def forward_with_objective_attribute(objective: str):
    model = BiphasicEncoderForPreTraining(tiny_biphasic_config())
    model.objective = objective  # what PhaseScheduleCallback sets
    return model(**sample_batch())


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: forward_with_objective_attribute("nsp"), r"objective must be one of \('clm', 'mlm'\), got 'nsp'"),
        (
            lambda: BiphasicEncoderForPreTraining(tiny_biphasic_config())(**sample_batch(), objective="nsp"),
            r"objective must be one of \('clm', 'mlm'\), got 'nsp'",
        ),
        (
            lambda: DataCollatorForBiphasic(tiny_tokenizer(), objective="nsp"),
            r"objective must be None \(both views\) or one of \('clm', 'mlm'\), got 'nsp'",
        ),
        (lambda: PhaseScheduleCallback.from_string("clm:0.25,nsp:0.75"), "Unknown objective 'nsp' .*; use clm or mlm"),
        (lambda: PhaseScheduleCallback([("mlm", 1.0), ("MLM", 0.0)]), "Unknown objective 'MLM'"),
        (
            lambda: PhaseScheduleCallback.from_string("clm:0.25,mlm:0.5"),
            r"fractions must sum to 1 \(they cover max_steps\), got 0.75",
        ),
        (lambda: PhaseScheduleCallback.from_string("clm:0.5,mlm:0.6"), "phase fractions must sum to 1 .*got 1.1"),
        (lambda: PhaseScheduleCallback.from_string("clm:0,mlm:1"), r"must have a fraction of max_steps in \(0, 1\]"),
        (
            lambda: PhaseScheduleCallback.from_string("clm,mlm"),
            "Phase 'clm' is not OBJECTIVE:FRACTION; write e.g. 'clm:0.25",
        ),
        (lambda: PhaseScheduleCallback.from_string(" , "), r"needs at least one phase, e.g. \[\('clm', 0.25\)"),
    ],
    ids=[
        "attribute",
        "forward",
        "collator",
        "schedule-string",
        "schedule-case",
        "sum-short",
        "sum-over",
        "zero-fraction",
        "syntax",
        "empty",
    ],
)
def test_unknown_objectives_and_bad_phase_schedules_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- where weights come from ----------------------------------------------------------------------------------------


def tiny_llama_folder(path):
    tiny_llama(num_hidden_layers=1).save_pretrained(path)
    return path


@pytest.mark.parametrize("causal_lm", ["llama", "gpt2"])
def test_tacl_refuses_to_start_from_a_causal_lm(causal_lm, tmp_path):
    if causal_lm == "llama":
        tiny_llama_folder(tmp_path)
    else:
        GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB_SIZE, n_embd=32, n_layer=1, n_head=4)).save_pretrained(tmp_path)
    message = f"is a '{causal_lm}' model .* no masked-LM form.*Pass such an encoder.*from_causal_lm"
    with pytest.raises(ValueError, match=message):
        TaclForPreTraining.from_encoder(str(tmp_path))


def test_tacl_names_a_missing_encoder_path(tmp_path):
    missing = tmp_path / "no-such-encoder"
    message = (
        r"Cannot load an encoder from '.*no-such-encoder'\. There is no such folder.*Pass the folder of an encoder"
    )
    with pytest.raises(ValueError, match=message):
        TaclForPreTraining.from_encoder(str(missing))


@pytest.mark.parametrize(
    "method,option,fix",
    [
        ("tacl", "--model_name_or_path", "TaCL continues a pretrained encoder: pass --model_name_or_path"),
        ("biphasic", "--from_causal_lm", "Pass a Llama-family causal LM's folder"),
        ("biphasic", "--model_name_or_path", "Pass the folder of a checkpoint saved with its tokenizer"),
    ],
)
def test_pretrain_names_a_missing_start_before_reading_the_corpus(method, option, fix, tmp_path):
    """The recipe reads the starting checkpoint's tokenizer first: the error names the path and what to pass, not a Hub repo-id rule."""
    from hf_encoders.errors import TokenizerLoadError
    from hf_encoders.training.pretrain import main

    missing = str(tmp_path / "no-such-checkpoint")
    with pytest.raises(
        TokenizerLoadError, match=f"cannot load a tokenizer from '{re.escape(missing)}'.*{re.escape(fix)}"
    ):
        main(["--method", method, option, missing, "--output_dir", str(tmp_path / "out"), "--report_to", "none"])


def test_from_causal_lm_names_a_missing_path_and_a_biphasic_checkpoint(saved, tmp_path):
    message = (
        r"Cannot load a causal LM from '.*nowhere'\. There is no such file or folder.*Pass a Llama-family causal LM"
    )
    with pytest.raises(ValueError, match=message):
        BiphasicEncoderForPreTraining.from_causal_lm(tmp_path / "nowhere")
    message = (
        "already a biphasic checkpoint, nothing to convert: load it with BiphasicEncoderForPreTraining.from_pretrained"
    )
    with pytest.raises(ValueError, match=message):
        BiphasicEncoderForPreTraining.from_causal_lm(saved["biphasic"])


CROSS_LOADS = [
    ("mae_lm", TaclForPreTraining, "'mae_lm' model, not a TaCL training state.*from_encoder"),
    ("mae_lm", BiphasicEncoderForPreTraining, "'mae_lm' model, not a biphasic one.*its own model's class"),
    ("mae_lm", BiphasicEncoderForMaskedLM, "'mae_lm' model, not a biphasic one.*its own model's class"),
    ("tacl", MaeLmForMaskedLM, "'tacl' model, not an MAE-LM one.*its own model's class"),
    ("tacl", BiphasicEncoderForPreTraining, "'tacl' model, not a biphasic one"),
    ("biphasic", MaeLmForMaskedLM, "'biphasic' model, not an MAE-LM one"),
    ("biphasic", MaeLmModel, "'biphasic' model, not an MAE-LM one"),
    ("biphasic", TaclForPreTraining, "'biphasic' model, not a TaCL training state.*from_encoder"),
]


@pytest.mark.parametrize("source,target,message", CROSS_LOADS, ids=[f"{s}-as-{t.__name__}" for s, t, _ in CROSS_LOADS])
def test_a_checkpoint_of_one_model_is_refused_by_another(saved, source, target, message):
    with pytest.raises(ValueError, match=message):
        target.from_pretrained(saved[source])


@pytest.mark.parametrize("source,target", [(s, t) for s in TINY_CONFIGS for t in TINY_CONFIGS if s != t])
def test_no_model_loads_another_models_checkpoint(saved, source, target):
    """Every pair, so a new method is covered too; CROSS_LOADS checks the fixes the messages name."""
    found, expected = METHODS[source].model_type, METHODS[target].model_type
    with pytest.raises(ValueError, match=rf"holds a '{found}' model, not .* \(model_type '{expected}'\)"):
        type(pretraining_model(target)).from_pretrained(saved[source])


def test_foreign_transformers_checkpoints_are_sent_to_the_converters(tmp_path):
    tiny_llama_folder(tmp_path / "llama")
    message = "'llama' model, not a biphasic one.*convert it with `hf-encoders convert --from_causal_lm`"
    with pytest.raises(ValueError, match=message):
        BiphasicEncoderForPreTraining.from_pretrained(tmp_path / "llama")
    BertForPreTraining(BertConfig(**BERT_STUDENT, num_attention_heads=4)).save_pretrained(tmp_path / "bert")
    message = r"'bert' model, not a TaCL training state .* start TaCL from an encoder checkpoint use TaclForPreTraining.from_encoder"
    with pytest.raises(ValueError, match=message):
        TaclForPreTraining.from_pretrained(tmp_path / "bert")
    message = r"'bert' model, not an MAE-LM one .* start MAE-LM from that encoder with MaeLmForMaskedLM.from_encoder"
    with pytest.raises(ValueError, match=message):
        MaeLmForMaskedLM.from_pretrained(tmp_path / "bert")


@pytest.mark.parametrize("method", sorted(TINY_CONFIGS))
@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_corrupt_weights_file_is_named_with_the_fix(saved, tmp_path, method, damage):
    folder = shutil.copytree(saved[method], tmp_path / "checkpoint")
    weights = folder / "model.safetensors"
    content = weights.read_bytes()
    weights.write_bytes(
        {"truncated": content[: len(content) // 2], "garbage": b"\x00garbage" * 64, "empty": b""}[damage]
    )
    message = (
        rf"Cannot read {re.escape(str(weights))} \(SafetensorError: .*\): the weights file is corrupt or truncated"
    )
    with pytest.raises(ValueError, match=f"{message}.*re-download or re-save the checkpoint"):
        type(pretraining_model(method)).from_pretrained(folder)


@pytest.mark.parametrize("method", sorted(TINY_CONFIGS))
def test_weights_that_do_not_fit_the_config_are_refused(saved, method):
    """A config with narrower feed-forward layers than the checkpoint: every mis-shaped weight is named, not
    re-initialised (transformers would raise a bare RuntimeError, or re-initialise with ignore_mismatched_sizes)."""
    if method == "tacl":
        config = tiny_tacl_config()
        config.student_config.intermediate_size = 48
    else:
        config = TINY_CONFIGS[method](intermediate_size=48)
    model_class = type(pretraining_model(method))
    saved_shapes = {key: tuple(value.shape) for key, value in load_file(saved[method] / "model.safetensors").items()}
    built_shapes = {key: tuple(value.shape) for key, value in model_class(config).state_dict().items()}
    first = min(key for key, shape in built_shapes.items() if saved_shapes.get(key, shape) != shape)
    key = re.escape(f"{first}: checkpoint {saved_shapes[first]} vs model {built_shapes[first]}")
    message = rf"does not fit {model_class.__name__} \(mis-shaped: .*{key}.*same configuration"
    with pytest.raises(ValueError, match=message):
        model_class.from_pretrained(saved[method], config=config)


def test_a_biphasic_task_head_may_opt_into_reinitialising_a_mis_shaped_head(tmp_path):
    """The strict loader keeps transformers' explicit escape hatch for a new label count."""
    from hf_encoders import BiphasicEncoderForSequenceClassification

    BiphasicEncoderForSequenceClassification(tiny_biphasic_config(num_labels=3)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"mis-shaped: \['classifier.bias: checkpoint \(3,\) vs model \(5,\)"):
        BiphasicEncoderForSequenceClassification.from_pretrained(tmp_path, num_labels=5)
    model = BiphasicEncoderForSequenceClassification.from_pretrained(
        tmp_path, num_labels=5, ignore_mismatched_sizes=True
    )
    assert model.classifier.out_features == 5


# --- legal but awkward batches --------------------------------------------------------------------------------------

AWKWARD = ["no targets", "one row all masked", "one row all padding", "one token"]


def awkward_batch(case: str, objective: str | None) -> dict[str, torch.Tensor]:
    batch = sample_batch()
    input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
    if case == "one token":
        input_ids, attention_mask = input_ids[:, :1].clone(), attention_mask[:, :1].clone()
        input_ids[0, 0] = MASK_TOKEN_ID
    if case == "no targets":
        input_ids[input_ids == MASK_TOKEN_ID] = 9
    if case == "one row all masked":
        input_ids[0] = MASK_TOKEN_ID
    if case == "one row all padding":
        input_ids[0], attention_mask[0] = 0, 0
    if objective == "clm":
        labels = next_token_labels(input_ids, attention_mask)
        if case == "no targets":
            labels = torch.full_like(labels, -100)
    else:
        labels = torch.where((input_ids == MASK_TOKEN_ID) & attention_mask.bool(), 7, -100)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("method", PRETRAINING_METHODS)
@pytest.mark.parametrize("case", AWKWARD)
def test_awkward_batches_give_finite_losses_and_gradients(case, method, attn_implementation):
    name, _, objective = method.partition("-")
    torch.manual_seed(0)
    model = pretraining_model(method, attn_implementation=attn_implementation).train()  # TaCL: the student's
    assert getattr(model, "student", model).config._attn_implementation == attn_implementation
    batch = awkward_batch(case, objective or None)
    output = model(**batch, **extra_inputs(method, batch["input_ids"].shape[0]))
    output.loss.backward()
    assert torch.isfinite(output.loss), f"{name} {case}: loss {output.loss}"
    gradients = [parameter.grad for parameter in model.parameters() if parameter.grad is not None]
    assert gradients and all(torch.isfinite(gradient).all() for gradient in gradients)
    if case == "no targets" and name != "tacl":  # TaCL keeps its NSP term; the token terms are 0
        assert output.loss == 0
    if case == "no targets" and name == "tacl":
        assert output.tacl_loss == 0 and output.mlm_loss == 0
    model.eval()
    with torch.no_grad():  # and every position's prediction, padded rows included, stays finite at inference
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    assert logits.shape[:2] == batch["input_ids"].shape and torch.isfinite(logits).all()

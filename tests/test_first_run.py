"""What a new user meets first: a frozen real token, a reused output folder, errors in the command line's words."""

import json
import re
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from matplotlib.figure import Figure
from tqdm.auto import tqdm
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    BertModel,
    TrainerControl,
    TrainerState,
    TrainingArguments,
    modeling_utils,
)
from transformers.testing_utils import CaptureLogger
from transformers.utils import logging as transformers_logging

import hf_encoders_cli
from hf_encoders import DataCollatorForMaeLm, MaeLmForMaskedLM, MaeLmForSequenceClassification
from hf_encoders.analysis import plots
from hf_encoders.analysis.plots import TRAINING_DIAGNOSTICS
from hf_encoders.data.corpus import load_documents
from hf_encoders.methods.biphasic import recipe as biphasic
from hf_encoders.methods.mae_lm import conversion as mae_lm_conversion
from hf_encoders.methods.mae_lm import recipe as mae_lm
from hf_encoders.methods.mlm import recipe as mlm
from hf_encoders.models.biphasic import BiphasicConfig
from hf_encoders.models.mae_lm import MaeLmConfig, modeling_mae_lm
from hf_encoders.models.tacl import TaclForPreTraining, modeling_tacl
from hf_encoders.training import diagnostics, preemption
from hf_encoders.training import pretrain as pretrain_module
from hf_encoders.training import recipe as base
from hf_encoders.training.arguments import SIZES_HELP, PretrainArguments
from hf_encoders.training.callbacks import DiagnosticsCallback, collapse
from hf_encoders.training.cards import training_summary, write_model_card
from hf_encoders.training.loss_curves import plot_run, wants_log_axis
from hf_encoders.training.model_sizes import parse_config_overrides
from hf_encoders.training.output_dir import logger as output_dir_logger
from hf_encoders.training.preemption import PreemptionCallback
from hf_encoders.training.pretrain import one_progress_bar
from hf_encoders.training.recipe import get_recipe
from hf_encoders_cli import main
from tests.test_cli import run_script
from tests.tiny_models import save_tiny_bert, tiny_llama, tiny_mae_lm_config, tiny_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")


def padded_batch(tokenizer):
    """Two rows of different lengths, padded by the MAE-LM collator with the tokenizer's pad id."""
    rows = [tokenizer("w5 w6 w7 w8 w9 w10 w11 w12")["input_ids"], tokenizer("w13 w14 w15")["input_ids"]]
    return DataCollatorForMaeLm(tokenizer, seed=0)([{"input_ids": row} for row in rows])


@pytest.mark.parametrize("model_class", [MaeLmForMaskedLM, MaeLmForSequenceClassification])
def test_padding_with_another_id_than_the_config_warns_once_naming_both(model_class):
    tokenizer = tiny_tokenizer("llama", pad_token="</s>")  # pads with id 2; the config keeps its default 0
    assert tokenizer.pad_token_id == 2
    batch = padded_batch(tokenizer)
    assert (batch["input_ids"][batch["attention_mask"] == 0] == 2).all()
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    model = model_class(tiny_mae_lm_config()).train()
    with CaptureLogger(modeling_mae_lm.logger) as captured:
        model(**inputs)
        model(**inputs)
    assert captured.out.count("pads with token id 2") == 1
    assert "config.pad_token_id is 0: the embedding of token 0" in captured.out
    assert "pad_token_id=tokenizer.pad_token_id (2)" in captured.out

    agreeing = model_class(tiny_mae_lm_config(pad_token_id=tokenizer.pad_token_id)).train()
    with CaptureLogger(modeling_mae_lm.logger) as captured:
        agreeing(**inputs)
    assert captured.out == ""


def test_the_pad_id_read_as_a_real_token_warns():
    model = MaeLmForMaskedLM(tiny_mae_lm_config()).train()
    input_ids = torch.tensor([[2, 7, 0, 9, 3]])  # token 0 (config.pad_token_id) where attention_mask is 1
    with CaptureLogger(modeling_mae_lm.logger) as captured:
        model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))
    assert "Token 0, config.pad_token_id, occurs where attention_mask is 1" in captured.out


def tiny_argv(output_dir, method, *extra):
    # A small tokenizer where one is trained; a run given one (or TaCL's encoder) would refuse --vocab_size.
    given_tokenizer = method == "tacl" or {"--tokenizer_name", "--model_name_or_path", "--from_causal_lm"} & set(extra)
    return [
        "pretrain",
        f"--method={method}",
        f"--output_dir={output_dir}",
        *("--max_steps", "2", "--per_device_train_batch_size", "4", "--max_documents", "30"),
        *(() if given_tokenizer else ("--vocab_size", "300")),
        *("--block_size", "32", "--report_to", "none", "--disable_tqdm", "true"),
        *extra,
    ]


def test_a_folder_holding_another_method_is_refused_or_cleared(tmp_path, capsys):
    folder = tmp_path / "out"
    # A position table longer than 512: the saved tokenizer follows it.
    assert main(tiny_argv(folder, "mae_lm", "--config_overrides", "max_position_embeddings=640")) == 0
    last_line = capsys.readouterr().out.strip().splitlines()[-1]
    assert last_line == (
        f"hf-encoders pretrain: model in {folder}; card {folder / 'README.md'}; plots {folder / 'loss_curve.png'}"
    )
    assert '"model_max_length": 640' in (folder / "tokenizer_config.json").read_text()
    (folder / "notes.txt").write_text("mine")

    with pytest.raises(ValueError) as refused:
        main(tiny_argv(folder, "biphasic"))
    message = str(refused.value)
    assert "holds a model of MAE-LM ('mae_lm' in its config.json), not of Biphasic" in message
    assert "Pass a new --output_dir, or add --overwrite_output_dir" in message
    with pytest.raises(ValueError, match="--overwrite_output_dir would remove the checkpoints"):
        main(tiny_argv(folder, "biphasic", "--overwrite_output_dir", "--resume_from_checkpoint", "true"))

    assert main(tiny_argv(folder, "biphasic", "--overwrite_output_dir")) == 0
    assert (folder / "modeling_biphasic.py").is_file() and (folder / "notes.txt").read_text() == "mine"
    assert not list(folder.glob("*mae_lm*"))


def test_a_folder_holding_an_earlier_runs_checkpoints_is_refused_unless_the_run_resumes_from_one(tmp_path):
    folder = tmp_path / "out"
    saving = ("--save_strategy", "steps", "--save_steps", "1", "--keep_optimizer_state")  # runs are trained on
    assert main(tiny_argv(folder, "mae_lm", *saving)) == 0
    with pytest.raises(ValueError) as refused:
        main(tiny_argv(folder, "mae_lm", *saving))
    assert str(refused.value) == (
        f"--output_dir {folder} holds the checkpoints of an earlier run (2 checkpoints up to checkpoint-2). Add "
        "--resume_from_checkpoint true to continue it, --overwrite_output_dir to start afresh (removing what "
        "hf-encoders wrote there), or pass a new --output_dir."
    )
    # Going back to an earlier checkpoint is allowed, and said; another run's checkpoint is refused.
    earlier = folder / "checkpoint-1"
    with CaptureLogger(output_dir_logger) as captured:
        assert main(tiny_argv(folder, "mae_lm", *saving, "--resume_from_checkpoint", str(earlier))) == 0
    assert captured.out.startswith(
        f"Resuming from {earlier}, an earlier checkpoint than checkpoint-2: each stays until"
    )
    other = tmp_path / "other"
    assert main(tiny_argv(other, "mae_lm", *saving, "--max_steps", "1")) == 0
    with pytest.raises(ValueError) as refused:
        main(tiny_argv(folder, "mae_lm", *saving, "--resume_from_checkpoint", str(other / "checkpoint-1")))
    assert str(refused.value) == (
        f"--output_dir {folder} holds the checkpoints of another run (2 checkpoints up to checkpoint-2) than the one "
        f"this run resumes from ({other / 'checkpoint-1'}); resume into a new --output_dir, or remove them."
    )
    assert main(tiny_argv(folder, "mae_lm", *saving, "--max_steps", "3", "--resume_from_checkpoint", "true")) == 0
    assert (folder / "checkpoint-3").is_dir()

    # A checkpoint interrupted while being written is never resumed from: a fresh run may start beside it.
    fresh = tmp_path / "fresh"
    (fresh / "checkpoint-5").mkdir(parents=True)
    assert main(tiny_argv(fresh, "mae_lm", *saving)) == 0
    assert main(tiny_argv(folder, "mae_lm", "--save_strategy", "no", "--overwrite_output_dir")) == 0
    assert not list(folder.glob("checkpoint-*"))


def test_a_missing_output_dir_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [argument for argument in tiny_argv("x", "mae_lm") if not argument.startswith("--output_dir")]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "--output_dir is required" in capsys.readouterr().err
    assert not (tmp_path / "trainer_output").exists()


def test_a_tokenizer_without_mask_token_is_named_with_the_command_line_fix(tmp_path):
    folder = tmp_path / "tokenizer"
    tiny_tokenizer("bert", mask_token=None).save_pretrained(folder)
    with pytest.raises(ValueError) as refused:
        main(tiny_argv(tmp_path / "out", "mae_lm", "--tokenizer_name", str(folder)))
    assert f"The tokenizer of {folder} has no mask token, which MAE-LM needs" in str(refused.value)
    assert "pass --tokenizer_name a tokenizer that has one, or leave --tokenizer_name out" in str(refused.value)


@pytest.mark.parametrize("method", ["mlm", "mae_lm", "tacl", "biphasic"])
def test_a_block_longer_than_the_continued_models_positions_is_refused_before_the_corpus_is_read(
    method, tmp_path, monkeypatch
):
    def never(*args, **kwargs):
        raise AssertionError("the corpus was read before --block_size was checked")

    monkeypatch.setattr(pretrain_module, "run_documents", never)
    if method == "biphasic":
        option, start = "--from_causal_lm", str(tmp_path / "llama")
        tiny_llama().save_pretrained(start)
    else:
        option, start = "--model_name_or_path", save_tiny_bert(tmp_path / "bert", max_position_embeddings=64)
    with pytest.raises(ValueError) as refused:
        main(tiny_argv(tmp_path / "out", method, option, start, "--block_size", "128"))
    assert str(refused.value) == (
        f"--block_size 128 is longer than the 64 positions {start}'s position table covers; pass --block_size 64 or "
        "less for this model."
    )


def test_help_states_the_sizes_of_every_preset():
    for sizes in (mae_lm.SIZES, mlm.SIZES, biphasic.SIZES):
        for name, shape in sizes.items():
            assert f"{name} {shape['num_hidden_layers']} x {shape['hidden_size']}" in SIZES_HELP


def test_a_collapse_after_warm_up_warns_once_and_reaches_the_card(tmp_path, monkeypatch):
    collapsed = {"effective_rank": 1, "self_similarity": 0.97}
    assert collapse(collapsed) and collapse({"effective_rank": 3, "self_similarity": 0.95})
    assert collapse({"effective_rank": 3, "self_similarity": 0.94}) is None
    callback = DiagnosticsCallback(2, tokenizer=None, sentences=["a sentence."])
    monkeypatch.setattr(callback, "measure", lambda model: dict(collapsed))
    args = TrainingArguments(tmp_path, warmup_steps=4, report_to="none", use_cpu=True)
    state = TrainerState(max_steps=10)
    steps_warned = []
    for step in (2, 4, 6, 8):
        state.global_step = step
        with CaptureLogger(diagnostics.logger) as captured:
            callback.on_step_end(args, state, TrainerControl())
        steps_warned += [step] if "has collapsed" in captured.out else []
        assert step != 6 or "if it lasts, the measured small-run settings are in docs/pretraining.md" in captured.out
    assert steps_warned == [6], "after warm-up, once"

    state.log_history = [{"step": 8, "loss": 1.0, **collapsed}]
    assert "- representation collapse at step 8, in the top layer: its tokens are close to one vector" in (
        training_summary(state)
    )
    state.log_history = [{"step": 8, "loss": 1.0, "effective_rank": 20, "self_similarity": 0.3}]
    assert "collapse" not in training_summary(state)


def test_a_collapse_says_which_test_fired():
    assert collapse({"effective_rank": 1.8, "self_similarity": 0.36}) == (
        "its tokens span at most 2 directions (effective rank 1.8 <= 2); self-similarity 0.36 is not collapsed"
    )
    assert collapse({"effective_rank": 40, "self_similarity": 0.96}) == (
        "its tokens are close to one vector (self-similarity 0.96 >= 0.95); effective rank 40 is not collapsed"
    )
    assert collapse({"effective_rank": 1, "self_similarity": 0.99}) == (
        "its tokens are close to one vector (self-similarity 0.99 >= 0.95) and its tokens span at most 2 directions "
        "(effective rank 1 <= 2)"
    )


def test_a_log_axis_only_over_more_than_a_decade():
    assert not wants_log_axis([8.6, 9.1, 8.0]) and wants_log_axis([0.05, 0.7, 6.0]) and not wants_log_axis([])


def test_the_biphasic_card_says_which_phases_ran(bert, tmp_path):
    pfs, cpt = tmp_path / "pfs", tmp_path / "cpt"
    assert main(tiny_argv(pfs, "biphasic", "--tokenizer_name", bert)) == 0
    assert "losses of the two phases" in (pfs / "README.md").read_text()
    assert main(tiny_argv(cpt, "biphasic", "--model_name_or_path", str(pfs))) == 0
    card = (cpt / "README.md").read_text()
    assert "masked language modelling alone" in card and "two phases" not in card


def test_a_resume_does_not_call_a_tied_weight_missing(tmp_path):
    from transformers import trainer as trainer_module

    from hf_encoders.training.trainer import PretrainingTrainer

    model = MaeLmForMaskedLM(tiny_mae_lm_config())
    trainer = PretrainingTrainer(model=model, args=TrainingArguments(tmp_path, report_to="none", use_cpu=True))
    with CaptureLogger(trainer_module.logger) as captured:
        trainer._issue_warnings_after_load(
            SimpleNamespace(missing_keys=["lm_head.vocab_projection.weight"], unexpected_keys=[])
        )
    assert "missing keys" not in captured.out
    with CaptureLogger(trainer_module.logger) as captured:
        trainer._issue_warnings_after_load(
            SimpleNamespace(missing_keys=["lm_head.vocab_projection.weight", "lm_head.bias"], unexpected_keys=[])
        )
    assert "missing keys in the checkpoint model loaded: ['lm_head.bias']" in captured.out


@pytest.mark.parametrize(
    "saved,loaded",
    [
        ("BertForPreTraining", "AutoModelForSequenceClassification"),
        ("BertForMaskedLM", "AutoModelForSequenceClassification"),
        ("BertForMaskedLM", "AutoModel"),
    ],
)
def test_a_model_built_from_another_checkpoint_loads_quietly_and_missing_encoder_weights_are_named(
    tmp_path, capsys, saved, loaded
):
    """What analyze and evaluate load: a task head new by design, the pre-training head left behind, and the pooler
    that `pretrain --method mlm`'s BertForMaskedLM never had are expected and said nothing of; an encoder weight the
    checkpoint lacks is named."""
    import transformers
    from safetensors.torch import load_file, save_file
    from transformers import modeling_utils

    from hf_encoders import model_folders

    folder = tmp_path / "bert"
    save_tiny_bert(folder, getattr(transformers, saved))
    auto_class, options = getattr(transformers, loaded), ({"num_labels": 2} if loaded != "AutoModel" else {})
    with CaptureLogger(modeling_utils.logger) as transformers_log, CaptureLogger(model_folders.logger) as ours:
        model_folders.load_model(auto_class, str(folder), **options)
    assert "LOAD REPORT" not in transformers_log.out and ours.out == ""
    assert "Loading weights" not in capsys.readouterr().err
    assert transformers_logging.is_progress_bar_enabled()  # turned back on after the load

    weights = load_file(folder / "model.safetensors")
    save_file(
        {key: value for key, value in weights.items() if "layer.0.output.dense" not in key},
        folder / "model.safetensors",
    )
    with CaptureLogger(model_folders.logger) as ours:
        model_folders.load_model(auto_class, str(folder), **options)
    prefix = "" if loaded == "AutoModel" else "bert."
    assert f"lacks encoder weights ['{prefix}encoder.layer.0.output.dense.bias'" in ours.out


def test_max_steps_cut_to_one_epoch_is_said_once():
    from hf_encoders.evaluation import finetune

    settings = finetune.RunSettings(learning_rate=1e-5, seed=0, max_steps=20, batch_size=32)
    with CaptureLogger(finetune.logger) as captured:
        assert settings.steps_for(150) == 5 and settings.steps_for(150) == 5
        assert settings.steps_for(1000) == 20
    assert captured.out.count("--max_steps 20 is more than one epoch") == 1
    assert "150 training examples at batch 32: its runs take 5 steps" in captured.out


@pytest.mark.parametrize(
    "config_class,text,message",
    [
        (
            BertConfig,
            "num_hiden_layers=4",
            "BertConfig has no field 'num_hiden_layers' (did you mean num_hidden_layers",
        ),
        (MaeLmConfig, "decoder_num_hidden_layer=1", "(did you mean decoder_num_hidden_layers"),
        (BiphasicConfig, "hidden_size=8,rms_eps=1e-5", "BiphasicConfig has no field 'rms_eps'"),
        (MaeLmConfig, "layer_norm_eps=abc", "layer_norm_eps=abc: layer_norm_eps takes a float"),
        (BertConfig, "num_hidden_layers=2.5", "num_hidden_layers=2.5: num_hidden_layers takes an int"),
        (BertConfig, "is_decoder=maybe", "is_decoder=maybe: is_decoder takes a bool"),
    ],
)
def test_config_overrides_refuse_unknown_fields_and_values_of_another_type(config_class, text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_config_overrides(text, config_class)


def test_config_overrides_are_cast_to_the_fields_types():
    overrides = parse_config_overrides(
        "hidden_dropout_prob=0,is_decoder=yes,hidden_act=gelu,classifier_dropout=0.2", BertConfig
    )
    assert overrides == {
        "hidden_dropout_prob": 0.0,
        "is_decoder": True,
        "hidden_act": "gelu",
        "classifier_dropout": 0.2,
    }
    assert type(overrides["hidden_dropout_prob"]) is float


def test_a_mistyped_decoder_field_is_refused_when_converting_an_encoder(tmp_path):
    with pytest.raises(ValueError, match=r"MaeLmConfig has no field 'decoder_num_hidden_layer' \(did you mean"):
        MaeLmForMaskedLM.from_encoder(save_tiny_bert(tmp_path / "bert"), decoder_num_hidden_layer=1)


def test_the_script_names_a_mistyped_override_in_one_line(tmp_path):
    argv = tiny_argv(tmp_path / "out", "mlm", "--config_overrides", "num_hiden_layers=4")
    result = run_script(*argv)
    assert result.returncode == 2 and not (tmp_path / "out" / "config.json").exists()
    assert result.stderr.startswith("hf-encoders: error: BertConfig has no field 'num_hiden_layers'")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "method,template,custom_code",
    [
        ("mlm", None, False),
        ("mae_lm", None, True),
        ("biphasic", None, True),
        ("tacl", None, True),
        ("tacl", "tacl_student", False),
    ],
)
def test_every_usage_line_of_a_folder_with_custom_code_trusts_it(tmp_path, method, template, custom_code):
    """Without trust_remote_code=True, even AutoTokenizer stops at transformers' "run the custom code? [y/N]"
    prompt: it reads config.json (and its auto_map) first."""
    args = PretrainArguments(method=method)
    card = write_model_card(tmp_path / "out", TrainerState(), recipe=get_recipe(method), args=args, template=template)
    code = "\n".join(re.findall(r"```python\n(.*?)```", card.read_text(), flags=re.DOTALL))
    loads = [line for line in code.splitlines() if re.search(r"from_pretrained\(|pipeline\(", line)]
    assert loads
    for line in loads:
        # TaCL's student, a stock BERT, sits in the state's student/ subfolder.
        trusts = custom_code and 'subfolder="student"' not in line
        assert ("trust_remote_code=True" in line) == trusts, line


def test_an_encoder_without_mlm_head_converts_with_our_warning_alone(tmp_path):
    folder = save_tiny_bert(tmp_path / "bert", BertModel)  # a pooler, no MLM head: a sentence-embedding BERT
    verbosity = transformers_logging.get_verbosity()
    with CaptureLogger(mae_lm_conversion.logger) as ours, CaptureLogger(modeling_utils.logger) as theirs:
        MaeLmForMaskedLM.from_encoder(folder)
    assert "has no pretrained MLM head: MAE-LM's LM head starts freshly initialised" in ours.out
    assert theirs.out == ""  # no LOAD REPORT, no "This checkpoint seem corrupted"
    assert transformers_logging.get_verbosity() == verbosity


@pytest.mark.parametrize(
    "source_class,heads,losses",
    [
        (BertForMaskedLM, "NSP head and pooler (NSP head: ['cls.seq_relationship.bias',", "the NSP loss"),
        (BertModel, "MLM head and NSP head (MLM head: ['cls.predictions.bias',", "the MLM and NSP loss"),
    ],
)
def test_tacl_names_which_head_starts_fresh(tmp_path, source_class, heads, losses):
    folder = save_tiny_bert(tmp_path / "bert", source_class)  # BertForMaskedLM: what `pretrain --method mlm` saves
    with CaptureLogger(modeling_tacl.logger) as captured:
        TaclForPreTraining.from_encoder(folder)
    assert f"has no pretrained {heads}" in captured.out
    assert f"TaCL trains them from scratch, so {losses} starts at chance level." in captured.out


def test_diagnostics_tick_each_probe_step_and_whole_ranks(tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr(plots, "_save", lambda figure, path: drawn.append(figure) or path)
    entries = [
        {"step": step, **{f"{name}/layer_{layer}": 1.5 + layer for name in TRAINING_DIAGNOSTICS for layer in (0, 1)}}
        for step in (3, 7, 10)
    ]
    plots.plot_training_diagnostics([{**entry, **dict.fromkeys(TRAINING_DIAGNOSTICS, 1.0)} for entry in entries], "x")
    similarity, rank, rank_with_mask = drawn[0].axes
    for axes in (similarity, rank, rank_with_mask):
        assert list(axes.get_xticks()) == [3, 7, 10]
    for axes in (rank, rank_with_mask):
        assert all(tick == int(tick) for tick in axes.get_yticks())


def test_a_loss_term_with_few_points_is_drawn_with_markers():
    history = [{"step": step, "loss": 2.0, "mlm_loss": 2.0} for step in range(1, 21)] + [
        {"step": 21, "loss": 3.0, "clm_loss": 3.0}
    ]
    axis = Figure().subplots()
    plot_run(axis, history)
    markers = {line.get_label(): line.get_marker() for line in axis.lines}
    assert markers["clm_loss"] == "o" and markers["mlm_loss"] in ("None", "", None)


@pytest.mark.parametrize(
    "options,message",
    [
        (
            ("--config_overrides", "decoder_num_hidden_layers=1, mask_in_encoder_fraction=0.5"),
            r"δ is no longer a model config field .*; pass --mask_in_encoder_fraction instead",
        ),
        (("--mask_in_encoder_fraction", "1.5"), r"--mask_in_encoder_fraction \(δ\) must lie in \[0, 1\], got 1.5"),
    ],
)
def test_delta_is_a_pretrain_argument_checked_before_the_corpus_is_read(tmp_path, options, message, monkeypatch):
    monkeypatch.setattr(base, "tokenize_documents", None)  # refused before any document is tokenised
    with pytest.raises(ValueError, match=message):
        main(tiny_argv(tmp_path / "out", "mae_lm", *options))


@pytest.mark.parametrize("method", ["mlm", "mae_lm", "tacl", "biphasic"])
def test_config_overrides_a_continued_checkpoint_would_ignore_are_refused(tmp_path, method):
    if method == "mae_lm":  # an MAE-LM checkpoint is continued as it is (an encoder it converts takes them)
        start = str(tmp_path / "start")
        MaeLmForMaskedLM(tiny_mae_lm_config()).save_pretrained(start)
    else:
        start = save_tiny_bert(tmp_path / "start", BertForMaskedLM)
    option = "--from_causal_lm" if method == "biphasic" else "--model_name_or_path"
    argv = tiny_argv(tmp_path / "out", method, option, start, "--config_overrides", "num_hidden_layers=4")
    never_read = "TaCL does not read --config_overrides"  # TaCL never builds a model
    message = (
        never_read if method == "tacl" else r"--config_overrides shapes a model built from scratch, but .* continues"
    )
    with pytest.raises(ValueError, match=message):
        main(argv)


def test_a_corpus_too_short_for_one_block_says_how_many_tokens_it_gave(tmp_path):
    corpus = tmp_path / "two.txt"
    corpus.write_text("The cat sat on the mat. It was warm.\n")
    bert = save_tiny_bert(tmp_path / "bert")
    tokens = len(AutoTokenizer.from_pretrained(bert)(corpus.read_text().strip(), add_special_tokens=False).input_ids)
    with pytest.raises(ValueError) as refused:
        main(
            tiny_argv(tmp_path / "out", "mlm", "--corpus", str(corpus), "--tokenizer_name", bert, "--block_size", "64")
        )
    assert str(refused.value) == (
        f"The corpus gave {tokens} tokens in 1 training document(s), which make 0 training examples of --block_size "
        "64: pass a smaller --block_size, or more text (a larger corpus, a larger --max_documents, or fewer rows left "
        "out by --skip_bad_rows)."
    )


def test_the_first_sigint_says_at_once_that_training_stops_after_the_step():
    callback = PreemptionCallback()
    callback.on_train_begin(args=None, state=None, control=None)
    try:
        with CaptureLogger(preemption.logger) as captured:
            signal.raise_signal(signal.SIGINT)  # handled at once, not when a step ends: no step runs here
    finally:
        callback.restore_handlers()
    assert captured.out == (
        "SIGINT received: training stops after the current step and saves a checkpoint to resume from (Ctrl-C "
        "again stops at once, without it).\n"
    )
    assert (callback.received, callback.number) == ("SIGINT", signal.SIGINT)


def test_a_rank_stopped_by_another_ranks_signal_exits_with_that_signals_status(monkeypatch):
    """Under torchrun the ranks reduce the signal's number: a rank that received none stops with the others, and
    `pretrain` exits 128 + the number the other rank received."""
    monkeypatch.setattr(preemption, "reduced_over_ranks", lambda tensor, op: torch.tensor([int(signal.SIGTERM)]))
    callback = PreemptionCallback()
    assert callback.stop_requested(SimpleNamespace(world_size=2, device="cpu"))
    assert (callback.received, callback.number) == ("a signal to another rank", signal.SIGTERM)
    result = pretrain_module.PretrainResult(
        None, Path("out"), Path("out"), stopped_by=callback.received, stop_signal=callback.number
    )
    assert result.exit_status == 143


def test_a_ctrl_c_no_command_catches_ends_the_script_in_one_line(monkeypatch, capsys):
    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(hf_encoders_cli, "main", interrupted)
    monkeypatch.setattr(sys, "argv", ["hf-encoders", "analyze", "model"])
    with pytest.raises(SystemExit) as exit_info:
        hf_encoders_cli.console()
    assert exit_info.value.code == 130
    assert capsys.readouterr().err == "\nhf-encoders: stopped by Ctrl-C.\n"


def test_the_card_says_the_models_size_schedule_and_the_documents_it_read(tmp_path):
    folder = tmp_path / "out"
    options = ("--learning_rate", "0.0005", "--lr_scheduler_type", "cosine", "--warmup_steps", "1")
    validation = (
        "--validation_split_percentage",
        "20",
        "--eval_strategy",
        "steps",
        "--eval_steps",
        "2",
        "--logging_steps",
        "1",
    )
    with CaptureLogger(pretrain_module.logger) as captured:
        assert main(tiny_argv(folder, "mlm", *options, "--weight_decay", "0.01", *validation)) == 0
    model = BertForMaskedLM.from_pretrained(folder)
    card = (folder / "README.md").read_text()
    assert f"- model size: {model.num_parameters():,} parameters\n" in card
    assert f"- vocabulary: {model.config.vocab_size:,} tokens\n" in card
    assert (
        "- learning rate: peak 0.0005, cosine schedule over 2 steps after 1 warm-up steps; weight decay 0.01\n" in card
    )
    # 30 documents read, a fifth of them (rounded up) held out.
    assert f"- documents: 30 of the corpus's {len(load_documents()):,} (--max_documents), 6 of them held out" in card
    assert "- model FLOPs utilisation: not measured, the device's peak is unknown (pass --peak_tflops" in card
    said = re.findall(
        r"Validation set: [\d,]+ examples from 6 held-out documents, evaluated every 2 steps\.", captured.out
    )
    assert len(said) == 1, captured.out


def test_a_finished_run_drops_its_last_optimizer_state_and_refuses_to_resume_without_it(tmp_path, capsys):
    folder = tmp_path / "out"
    saving = ("--save_strategy", "steps", "--save_steps", "1")
    with CaptureLogger(pretrain_module.logger) as captured:
        assert main(tiny_argv(folder, "mae_lm", *saving)) == 0
    assert (folder / "checkpoint-1" / "optimizer.pt").is_file(), "a checkpoint the run went on from keeps it"
    assert not list((folder / "checkpoint-2").glob("optimizer*"))
    assert f"Dropped the optimizer state of {folder / 'checkpoint-2'} (" in captured.out
    assert (folder / "model.safetensors").is_file()
    with pytest.raises(ValueError) as refused:
        main(tiny_argv(folder, "mae_lm", *saving, "--max_steps", "3", "--resume_from_checkpoint", "true"))
    assert str(refused.value) == (
        f"{folder / 'checkpoint-2'} holds no optimizer state: it is the last checkpoint of a finished run, which "
        "drops it unless --keep_optimizer_state. Continue its model with a new optimizer instead: "
        f"--model_name_or_path {folder / 'checkpoint-2'}, in a new --output_dir."
    )
    kept = tmp_path / "kept"
    assert main(tiny_argv(kept, "mae_lm", *saving, "--keep_optimizer_state")) == 0
    assert (kept / "checkpoint-2" / "optimizer.pt").is_file()


def test_a_warning_during_training_starts_a_line_of_its_own(capsys):
    bar = tqdm(total=3, file=sys.stderr, mininterval=0)
    bar.update(1)
    with one_progress_bar():
        diagnostics.logger.warning("the top layer collapsed")
    bar.close()
    err = capsys.readouterr().err
    assert err[: err.index("the top layer collapsed")].endswith("\r"), "the bar's line was not lifted first"
    assert "the top layer collapsed\n" in err


def test_a_short_runs_console_is_the_training_bar_and_lines_of_their_own(tmp_path, capsys):
    """No bar of datasets' for a short corpus's maps, and no bar opened under the training bar (a checkpoint's
    "Writing model shards"), whose cursor moves show as `^[[A` in a log; every bar is back on after the run."""
    import datasets

    argv = tiny_argv(tmp_path / "run", "mlm", "--save_steps", "1", "--disable_tqdm", "false")
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "2/2 [" in err  # the training bar
    assert "\x1b[A" not in err and "Writing model shards" not in err.split("2/2 [")[0] and "Map" not in err
    assert transformers_logging.is_progress_bar_enabled() and not datasets.are_progress_bars_disabled()


def test_a_long_corpus_keeps_its_tokenising_bar():
    import datasets

    with pretrain_module.map_bars_for(datasets.Dataset.from_dict({"text": ["a"] * 3})):
        assert datasets.are_progress_bars_disabled()
    long = datasets.Dataset.from_dict({"text": ["a"] * pretrain_module.MAP_BARS_FROM_DOCUMENTS})
    with pretrain_module.map_bars_for(long):
        assert not datasets.are_progress_bars_disabled()
    assert not datasets.are_progress_bars_disabled()


@pytest.mark.parametrize(
    "flags,interval",
    [
        (["--max_steps", "200"], 2),  # 100 points, not Trainer's 500-step interval's none
        (["--max_steps", "50"], 1),  # every step
        (["--max_steps", "20000"], 200),
        (["--max_steps", "1000000"], 500),  # a long run keeps Trainer's interval
        (["--max_steps", "200", "--logging_steps", "7"], 7),  # the user's
        (["--num_train_epochs", "1"], 500),  # no length yet: chosen once the data is known (next test)
        (["--preset", "biphasic-210m", "--use_cpu"], 420),  # the preset's 42,000 steps
    ],
)
def test_a_run_of_known_length_logs_about_a_hundred_points_unless_told(tmp_path, flags, interval):
    argv = ["--output_dir", str(tmp_path), *(() if "--preset" in flags else ("--method", "mlm")), *flags]
    assert pretrain_module.parse_arguments(argv)[1].logging_steps == interval


@pytest.mark.parametrize("flags", [(), ("--logging_steps", "7")])
def test_a_run_of_epochs_logs_about_a_hundred_points_unless_told(tmp_path, flags):
    folder = tmp_path / "run"
    argv = tiny_argv(folder, "mlm", "--max_steps", "-1", "--num_train_epochs", "1", "--max_documents", "10", *flags)
    assert main(argv) == 0
    log_history = json.loads((folder / "log_history.json").read_text())
    steps = log_history[-1]["step"]  # the end-of-run summary's
    assert steps > 100  # long enough that Trainer's interval is not every step
    interval = int(flags[1]) if flags else -(-steps // 100)
    assert [entry["step"] for entry in log_history if "loss" in entry] == list(range(interval, steps + 1, interval))


def test_a_short_runs_loss_curve_has_a_point_per_step_and_its_console_ten_of_them(tmp_path, capsys):
    folder = tmp_path / "run"
    assert main(tiny_argv(folder, "mlm", "--max_steps", "30")) == 0
    history = json.loads((folder / "log_history.json").read_text())
    assert [entry["step"] for entry in history if "loss" in entry] == list(range(1, 31))
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{'loss'")]
    assert len(printed) == 10 and "'epoch'" in printed[-1]


def test_the_console_prints_every_evaluation_and_about_ten_training_logs():
    from types import SimpleNamespace

    from hf_encoders.training.console_log import on_console

    def printed(max_steps, logging_steps, logs=("loss",)):
        steps = range(logging_steps, max_steps + 1, logging_steps)
        return [
            step
            for step in steps
            if on_console(SimpleNamespace(max_steps=max_steps, logging_steps=logging_steps, global_step=step), logs)
        ]

    assert printed(200, 2) == list(range(20, 201, 20))
    assert printed(25, 1) == [*range(3, 25, 3), 25]  # and the last step's
    assert printed(8, 1) == list(range(1, 9))  # a run that logs ten times or fewer prints each
    assert printed(200, 2, logs=("eval_loss",)) == list(range(2, 201, 2))

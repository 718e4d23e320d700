"""The console script: every subcommand answers --help, and `pretrain` runs a method end to end on Trainer."""

import json

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification

from hf_encoders.cli import SUBCOMMANDS, main


def test_top_level_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert all(name in out for name in SUBCOMMANDS)


@pytest.mark.parametrize("subcommand", sorted(SUBCOMMANDS))
def test_every_subcommand_has_its_own_help(subcommand, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([subcommand, "--help"])
    assert exit_info.value.code == 0
    assert f"hf-encoders {subcommand}" in capsys.readouterr().out


def test_pretrain_help_offers_every_training_argument(capsys):
    with pytest.raises(SystemExit):
        main(["pretrain", "--help"])
    out = capsys.readouterr().out
    assert all(
        option in out for option in ("--gradient_accumulation_steps", "--lr_scheduler_type", "--bf16", "--method")
    )


def tiny_pretrain_argv(output_dir, method="mae_lm", *extra):
    return [
        "pretrain",
        "--method",
        method,
        "--output_dir",
        str(output_dir),
        "--max_steps",
        "3",
        "--per_device_train_batch_size",
        "4",
        "--max_documents",
        "60",
        "--vocab_size",
        "400",
        "--block_size",
        "32",
        "--logging_steps",
        "1",
        "--save_steps",
        "2",
        "--report_to",
        "none",
        "--dataloader_pin_memory",
        "false",
        *extra,
    ]


def test_pretrain_mae_lm_writes_a_loadable_checkpoint_with_card_and_curve(tmp_path):
    output_dir = tmp_path / "mae"
    assert main(tiny_pretrain_argv(output_dir)) == 0
    log_history = json.loads((output_dir / "log_history.json").read_text())
    assert sum("loss" in entry for entry in log_history) == 3
    assert (output_dir / "loss_curve.png").stat().st_size > 1000
    card = (output_dir / "README.md").read_text()
    assert card.startswith("---\n") and "library_name: transformers" in card and "- mae_lm" in card
    assert "optimizer steps: 3" in card
    model = AutoModelForMaskedLM.from_pretrained(output_dir)
    classifier = AutoModelForSequenceClassification.from_pretrained(output_dir)
    torch.testing.assert_close(classifier.mae_lm.state_dict(), model.mae_lm.state_dict())


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--config_overrides", "hidden_size"], "KEY=VALUE"),
        (["--model_size", "huge"], "Unknown --model_size"),
        (["--corpus", "does/not/exist.txt"], "does not exist"),
    ],
)
def test_pretrain_bad_options_are_named(tmp_path, extra, message):
    with pytest.raises(ValueError, match=message):
        main(tiny_pretrain_argv(tmp_path / "out", "mae_lm", *extra))


def test_pretrain_unknown_method_is_named(tmp_path):
    with pytest.raises(ValueError, match="Unknown --method 'bert'"):
        main(tiny_pretrain_argv(tmp_path / "out", "bert"))


def test_pretrain_refuses_fp16_on_cpu(tmp_path):
    with pytest.raises(ValueError, match="--fp16 has no effect on CPU"):
        main(tiny_pretrain_argv(tmp_path / "out", "mae_lm", "--fp16", "--use_cpu"))

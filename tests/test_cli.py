"""The console script: every subcommand answers --help, and `pretrain` runs a method end to end on Trainer."""

import json
import os
import signal
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification

from hf_encoders_cli import SUBCOMMANDS, main


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


def run_script(*argv, env=None):
    """The installed console script's code path (`console`), in its own process, offline."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    command = [sys.executable, "-m", "hf_encoders", *argv]
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=300)


@pytest.mark.parametrize(
    "case,message",
    [
        ("empty corpus file", "empty.txt: the file is empty (0 bytes), so there is no document to train on"),
        ("folder without corpus files", "not a .txt/.jsonl/.json/.parquet file, nor a directory holding such files"),
        ("output_dir is a file", "is a file; pass a folder (it is created if it does not exist)"),
        ("unknown method", "Unknown --method 'bert'; choose one of mlm, mae_lm, tacl, biphasic."),
        ("validation share out of range", "--validation_split_percentage 60 is outside (0, 50]"),
        ("malformed corpus row", "bad.jsonl:2: not valid JSON (Expecting ',' delimiter: column 14); fix or delete"),
        ("mixture weight of 0", "bad.jsonl:0: the weight must be a positive number, not 0; leave a source out"),
    ],
)
def test_the_script_reports_bad_input_in_one_line_and_exits_2(case, message, tmp_path):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "cat.png").write_bytes(b"\x89PNG")
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "bad.jsonl").write_text('{"text": "Fine."}\n{"text": "x" "y"}\n')
    corpus, output_dir, method = str(tmp_path / "empty.txt"), str(tmp_path / "out"), "mae_lm"
    if case == "folder without corpus files":
        corpus = str(tmp_path / "images")
    elif case == "output_dir is a file":
        output_dir = str(tmp_path / "a-file")
    elif case == "unknown method":
        method = "bert"
    elif case in ("malformed corpus row", "mixture weight of 0"):
        corpus = str(tmp_path / "bad.jsonl") + (":0" if case == "mixture weight of 0" else "")
    argv = ["pretrain", "--method", method, "--corpus", corpus, "--output_dir", output_dir, "--report_to", "none"]
    if case == "validation share out of range":
        argv += ["--validation_split_percentage", "60", "--eval_strategy", "steps"]
    result = run_script(*argv)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("hf-encoders: error: ") and message in last_line
    assert result.stderr.count("hf-encoders: error:") == 1


def test_debug_shows_the_traceback(tmp_path):
    argv = ["pretrain", "--method", "bert", "--output_dir", str(tmp_path / "out")]
    for result in (run_script(*argv, "--debug"), run_script(*argv, env={"HF_ENCODERS_DEBUG": "1"})):
        assert result.returncode == 1 and "Traceback" in result.stderr
        assert result.stderr.strip().endswith(
            "ValueError: Unknown --method 'bert'; choose one of mlm, mae_lm, tacl, biphasic."
        )


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_script_with_a_complete_checkpoint_and_the_shells_exit_status(stop, tmp_path):
    """SIGTERM (what SLURM or a preemptible cloud sends) or Ctrl-C: the run finishes its step, saves, says how to
    resume, and exits 128 + the signal's number, so that `pretrain ... && evaluate ...` stops there."""
    output_dir = tmp_path / "out"
    argv = [
        *tiny_pretrain_argv(output_dir)[1:],
        "--max_steps",
        "500",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
    ]
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "hf_encoders", "pretrain", *argv]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment) as run:
        for line in run.stdout:  # the first training log: it is training
            if "'loss'" in line:
                break
        run.send_signal(stop)
        stdout, stderr = run.communicate(timeout=300)
    assert run.returncode == 128 + stop, stderr[-2000:]  # 143, 130
    assert f"Stopped by {stop.name} after step" in stderr
    assert stdout.splitlines()[-1] == (
        f"hf-encoders pretrain: stopped early, no final model; {output_dir} holds the checkpoint to continue from "
        "with --resume_from_checkpoint true."
    )
    assert "continue with --resume_from_checkpoint true" in stderr
    checkpoints = list(output_dir.glob("checkpoint-*"))
    assert len(checkpoints) == 1 and (checkpoints[0] / "trainer_state.json").exists()
    assert 0 < int(checkpoints[0].name.split("-")[1]) < 500
    assert not (output_dir / "README.md").exists(), "a preempted run is not a finished one: no final card"

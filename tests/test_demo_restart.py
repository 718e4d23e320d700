"""The demo as a user drives it: one Ctrl-C stops it with a line saying what is kept, the same command continues
from there (a finished stage kept, the interrupted pre-training resumed from its checkpoint), `--restart` starts
afresh, other settings are refused, and `demo --help` loads none of the package."""

import json
import signal

import pytest

from hf_encoders.demo import STATE, restart
from hf_encoders.methods import METHODS
from hf_encoders.training.preemption import PreemptionCallback
from hf_encoders_cli import DEMO_METHODS, main
from tests.test_fast_import import FRAMEWORKS, loaded_modules

pytestmark = pytest.mark.usefixtures("one_thread")

STOPPED_AT = 3


def demo_argv(output_dir, *extra):
    return [
        "demo",
        f"--output_dir={output_dir}",
        *("--steps", "10", "--batch_size", "4", "--block_size", "32", "--vocab_size", "300"),
        *("--finetune_examples", "24", "--finetune_epochs", "1", "--methods", "mlm,mae_lm"),
        *extra,
    ]


def test_one_ctrl_c_stops_the_demo_and_the_same_command_continues(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "demo"

    def ctrl_c_in_mae_lm(self, args, state, control, **kwargs):
        if args.output_dir.endswith("mae_lm") and state.global_step + 1 == STOPPED_AT:
            signal.raise_signal(signal.SIGINT)

    with monkeypatch.context() as patch:
        patch.setattr(PreemptionCallback, "on_step_begin", ctrl_c_in_mae_lm, raising=False)
        assert main(demo_argv(folder)) == 130
    captured = capsys.readouterr()
    checkpoint = folder / "pretrain" / "mae_lm" / f"checkpoint-{STOPPED_AT}"
    assert captured.out.strip().splitlines()[-1] == (
        f"hf-encoders demo: stopped. Kept in {folder}: the tokenizer; mlm pre-trained; mae_lm's pre-training at step "
        f"{STOPPED_AT} of 10 ({checkpoint}). Run the same command again to continue from there, or add --restart to "
        "start afresh."
    )
    assert "SIGINT received: training stops after the current step and saves a checkpoint" in captured.err
    assert "--resume_from_checkpoint" not in captured.err + captured.out  # an option the demo does not have
    assert not (folder / "analysis").exists(), "the demo went on past the stage Ctrl-C stopped"
    mlm_weights = (folder / "pretrain" / "mlm" / "model.safetensors").stat().st_mtime_ns

    assert main(demo_argv(folder)) == 0
    out = capsys.readouterr().out
    assert "=== pre-training MLM (BERT baseline): finished in an earlier run, kept ===" in out
    assert f"=== pre-training MAE-LM (10 steps, resumed from checkpoint-{STOPPED_AT}) ===" in out
    assert (folder / "pretrain" / "mlm" / "model.safetensors").stat().st_mtime_ns == mlm_weights
    history = json.loads((folder / "pretrain" / "mae_lm" / "log_history.json").read_text())
    assert history[-1]["step"] == 10 and (folder / "REPORT.md").is_file()
    assert set(json.loads((folder / STATE).read_text())["accuracies"]) == {"mlm", "mae_lm"}

    with pytest.raises(ValueError) as refused:
        main(demo_argv(folder, "--steps", "20"))
    assert str(refused.value) == (
        f"{folder} holds a demo run with --steps 10: pass the same to continue it, or add --restart to start afresh "
        "with these settings."
    )


def test_restart_removes_what_the_demo_wrote_and_nothing_else(tmp_path):
    for name in ("tokenizer", "pretrain/mlm", "analysis"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / STATE).write_text("{}")
    (tmp_path / "REPORT.md").write_text("old")
    (tmp_path / "notes.txt").write_text("mine")
    restart(tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


def test_a_folder_of_an_older_demo_without_its_state_is_refused(tmp_path):
    (tmp_path / "pretrain" / "mlm").mkdir(parents=True)
    with pytest.raises(ValueError, match=f"holds files of an earlier demo but no {STATE}.*add --restart"):
        main(demo_argv(tmp_path))


def test_demo_help_loads_no_framework_and_none_of_the_package():
    modules = loaded_modules(
        "sys.argv = ['hf-encoders', 'demo', '--help']\nfrom hf_encoders_cli import console\n"
        "try:\n    console()\nexcept SystemExit as exit:\n    assert exit.code == 0, exit.code"
    )
    assert [name for name in modules if name.split(".")[0] in (*FRAMEWORKS, "hf_encoders")] == []


def test_the_demos_methods_are_the_tables():
    assert tuple(METHODS) == DEMO_METHODS

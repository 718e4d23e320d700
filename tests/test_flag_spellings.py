"""One spelling per flag across commands (underscores, as pretrain and evaluate spell them); the dashed spellings
analyze, demo and convert had still work, warning once each, and evaluate, which never had them, takes none."""

import json
import warnings

import pytest

from hf_encoders import flag_spellings
from hf_encoders.analysis.command import build_parser as analyze_parser
from hf_encoders.demo import build_parser as demo_parser
from hf_encoders.flag_spellings import accept_dashed_spellings
from hf_encoders_cli import main
from tests.tiny_models import save_tiny_bert


@pytest.fixture(autouse=True)
def nothing_warned_yet(monkeypatch):
    monkeypatch.setattr(flag_spellings, "warned", set())


def test_both_spellings_parse_alike_and_the_dashed_one_warns_once():
    parser = demo_parser()
    underscored = ["--output_dir", "out", "--batch_size=8", "--finetune_epochs", "2"]
    dashed = ["--output-dir", "out", "--batch-size=8", "--finetune-epochs", "2"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the underscored spelling warns nothing
        expected = parser.parse_args(accept_dashed_spellings(underscored, parser))
    with pytest.warns(FutureWarning) as caught:
        assert parser.parse_args(accept_dashed_spellings(dashed, parser)) == expected
        assert parser.parse_args(accept_dashed_spellings(dashed, parser)) == expected  # no second warning
    messages = [str(warning.message) for warning in caught]
    assert len(messages) == 3
    assert "--output-dir is deprecated and will be removed: spell it --output_dir" in messages[0]
    assert (expected.output_dir.name, expected.batch_size, expected.finetune_epochs) == ("out", 8, 2.0)


def test_only_options_of_the_parser_are_respelled():
    parser = analyze_parser()
    argv = ["model-a", "--labels", "--not-an-option", "--", "--max-sentences"]
    assert accept_dashed_spellings(argv, parser) == argv  # a value, an unknown flag, what follows --


def test_analyze_takes_the_dashed_spelling(tmp_path):
    save_tiny_bert(tmp_path / "bert")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat. A dog ran in the park.\n")
    with pytest.warns(FutureWarning) as caught:
        argv = [str(tmp_path / "bert"), "--corpus", str(corpus), "--output-dir", str(tmp_path / "out")]
        assert main(["analyze", *argv, "--max-sentences", "1", "--device", "cpu"]) == 0
    assert [str(warning.message).split()[0] for warning in caught] == ["--output-dir", "--max-sentences"]
    assert json.loads((tmp_path / "out" / "report.json").read_text())["settings"]["sentences"] == 1


@pytest.mark.parametrize("flag", ["--from_causal_lm", "--from-causal-lm"])
def test_convert_takes_both_spellings(flag, tmp_path, monkeypatch, recwarn):
    converted = []
    monkeypatch.setattr(
        "hf_encoders.methods.biphasic.convert.convert_causal_lm", lambda *paths: converted.append(paths) or paths[1]
    )
    assert main(["convert", flag, "lm.gguf", str(tmp_path)]) == 0
    assert converted == [("lm.gguf", str(tmp_path))]
    assert [str(warning.message).split()[0] for warning in recwarn if warning.category is FutureWarning] == (
        ["--from-causal-lm"] if "-" in flag[2:] else []
    )


def test_evaluate_takes_the_underscored_spelling_only(tmp_path, monkeypatch, capsys):
    evaluated = []
    monkeypatch.setattr(
        "hf_encoders.evaluation.command.evaluate",
        lambda models, tasks, output_dir, *settings, **named: (
            evaluated.append((models, tasks, output_dir)) or output_dir
        ),
    )
    assert main(["evaluate", "model", "--task", "sc:sst2", "--output_dir", str(tmp_path)]) == 0
    assert evaluated == [(["model"], ["sc:sst2"], tmp_path)]
    with pytest.raises(SystemExit):
        main(["evaluate", "model", "--task", "sc:sst2", "--output_dir", str(tmp_path), "--max-steps", "5"])
    assert "unrecognized arguments: --max-steps 5" in capsys.readouterr().err

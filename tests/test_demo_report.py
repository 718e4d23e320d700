"""The demo's table says what confounds each row and sends readers to the controlled experiments."""

from argparse import Namespace

from hf_encoders.analysis import LayerwiseReport
from hf_encoders.demo import write_report
from hf_encoders.families import FAMILIES


def test_every_row_names_what_else_differs_from_the_baseline(tmp_path):
    settings = Namespace(steps=10, batch_size=2, block_size=8, output_dir=tmp_path)
    runs = {name: {"log_history": [{"loss": 5.0 + i}]} for i, name in enumerate(FAMILIES)}
    layers = dict(
        hidden_size=64,
        sentences=3,
        real_tokens=20,
        mask_tokens=3,
        rank_threshold=0.9,
        self_similarity=[0.5],
        isotropy=[0.1],
        effective_rank=[7],
        effective_rank_with_mask=[6],
        mask_effective_rank=[2],
    )
    analysis = [LayerwiseReport(model=name, **layers) for name in FAMILIES]
    text = write_report(settings, runs, analysis, dict.fromkeys(FAMILIES, 0.75)).read_text()

    rows = {line.split(" | ")[0].removeprefix("| "): line for line in text.splitlines() if line.startswith("| ")}
    for i, (name, family) in enumerate(FAMILIES.items()):
        assert rows[name] == f"| {name} | {5.0 + i:.3f} | 0.750 | 0.500 | 7 / 6 (of 64) | {family.demo_confounds} |"
    assert len({family.demo_confounds for family in FAMILIES.values()}) == len(FAMILIES)
    assert "experiments/REPORT.md" in text

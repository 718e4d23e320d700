"""`hf-encoders export CHECKPOINT OUTPUT_DIR`: a checkpoint that stock scripts load with no remote code.

- a TaCL checkpoint exports its student (with its MLM head, and NSP head when present) as a plain
  `bert` / `roberta` / `modernbert` checkpoint;
- a biphasic checkpoint exports to transformers' native `eurobert` classes, where that is exact.
"""

import argparse
import json
from pathlib import Path

from transformers import AutoTokenizer

from .training.recipes.tacl import export_student


def export_biphasic(checkpoint: str, output_dir: Path) -> None:
    import hf_encoders

    # The saved class (encoder, masked LM, a task head) decides which EuroBERT class it becomes.
    saved_class = getattr(hf_encoders, read_config(checkpoint)["architectures"][0])
    saved_class.from_pretrained(checkpoint).to_eurobert().save_pretrained(output_dir)
    AutoTokenizer.from_pretrained(checkpoint).save_pretrained(output_dir)


EXPORTERS = {"tacl": export_student, "biphasic": export_biphasic}


def read_config(checkpoint: str) -> dict:
    config_file = Path(checkpoint) / "config.json"
    if not config_file.exists():
        raise ValueError(
            f"{checkpoint}: no config.json; pass a folder written by save_pretrained or hf-encoders pretrain."
        )
    return json.loads(config_file.read_text())


def export(checkpoint: str, output_dir: str | Path) -> Path:
    model_type = read_config(checkpoint).get("model_type")
    if model_type not in EXPORTERS:
        raise ValueError(
            f"{checkpoint} is a {model_type!r} checkpoint; export handles {', '.join(EXPORTERS)}. "
            "MAE-LM checkpoints need no export: fine-tune them with --trust_remote_code."
        )
    output_dir = Path(output_dir)
    EXPORTERS[model_type](checkpoint, output_dir)
    return output_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hf-encoders export", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a TaCL or biphasic checkpoint folder")
    parser.add_argument("output_dir")
    args = parser.parse_args(argv)
    print(f"Exported to {export(args.checkpoint, args.output_dir)}")
    return 0

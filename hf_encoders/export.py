"""`hf-encoders export CHECKPOINT OUTPUT_DIR`: a checkpoint that stock scripts load with no remote code.

- a TaCL checkpoint exports its student (with its MLM head, and NSP head when present) as a plain
  `bert` / `roberta` / `modernbert` checkpoint;
- a biphasic checkpoint exports to transformers' native `eurobert` classes, where that is exact.

Which methods export, and how, is their `exporter` in the method table (`hf_encoders.methods`): a function of the
method's own `export.py`.
"""

import json
from pathlib import Path

from hf_encoders_cli import CommandParser

from ._moved import moved_attribute
from .methods import METHODS, load, method_of_model_type

# The methods' exporters this module held up to 0.2, by where they are now.
_MOVED = {
    "EUROBERT_CLASSES": "hf_encoders.methods.biphasic.export:EUROBERT_CLASSES",
    "export_biphasic": "hf_encoders.methods.biphasic.export:export_biphasic",
    "to_eurobert": "hf_encoders.methods.biphasic.export:to_eurobert",
    "export_student": "hf_encoders.methods.tacl.export:export_student",
}


def __getattr__(name: str):
    return moved_attribute(__name__, name, _MOVED)


def read_config(checkpoint: str) -> dict:
    config_file = Path(checkpoint) / "config.json"
    if not config_file.exists():
        raise ValueError(
            f"{checkpoint}: no config.json; pass a folder written by save_pretrained or hf-encoders pretrain."
        )
    return json.loads(config_file.read_text())


def export(checkpoint: str, output_dir: str | Path) -> Path:
    model_type = read_config(checkpoint).get("model_type")
    method = method_of_model_type(model_type)
    if method is None or method.exporter is None:
        exporting = ", ".join(name for name, method in METHODS.items() if method.exporter)
        why = f" {method.export_note[0].upper()}{method.export_note[1:]}." if method is not None else ""
        raise ValueError(f"{checkpoint} is a {model_type!r} checkpoint; export handles {exporting}.{why}")
    output_dir = Path(output_dir)
    load(method.exporter)(checkpoint, output_dir)
    return output_dir


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="hf-encoders export", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a TaCL or biphasic checkpoint folder")
    parser.add_argument("output_dir", help="the folder the exported checkpoint is written to")
    args = parser.parse_args(argv)
    print(f"Exported to {export(args.checkpoint, args.output_dir)}")
    return 0

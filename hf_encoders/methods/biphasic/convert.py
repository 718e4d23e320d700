"""`hf-encoders convert --from_causal_lm PATH OUTPUT_DIR`: a Llama-family causal LM (Llama, SmolLM2, Mistral,
Qwen2; a folder, Hub name or .gguf file) as a biphasic encoder checkpoint, ready for MLM (CPT)."""

from hf_encoders_cli import CommandParser

from ...flag_spellings import accept_dashed_spellings
from .conversion import convert_causal_lm


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="hf-encoders convert", description=" ".join(__doc__.split()))
    parser.add_argument(
        "--from_causal_lm", required=True, metavar="PATH", help="causal LM folder, Hub name or .gguf file"
    )
    parser.add_argument("output_dir", help="the folder the biphasic checkpoint is written to")
    args = parser.parse_args(accept_dashed_spellings(argv, parser))
    print(f"Converted to {convert_causal_lm(args.from_causal_lm, args.output_dir)}")
    return 0

"""TaCL's student as a plain checkpoint of its own model type: what `hf-encoders export` writes of a TaCL checkpoint,
which stock scripts fine-tune with no remote code."""

from pathlib import Path

from transformers import PreTrainedTokenizerBase

from ...data.tokenizer import load_tokenizer
from ...models.tacl import TaclForPreTraining


def export_student(
    checkpoint: str | Path, output_dir: str | Path, tokenizer: PreTrainedTokenizerBase | str | Path | None = None
) -> Path:
    """Write the student of a TaCL checkpoint (a Trainer output or checkpoint-N folder) as a plain checkpoint of
    its own model type, with the tokenizer, so run_glue / run_qa fine-tune it without trust_remote_code.

    The tokenizer is `tokenizer` (object or path), else the one saved in `checkpoint` (as `hf-encoders pretrain` and
    a Trainer given `processing_class=tokenizer` save it).
    """
    if tokenizer is None:
        if not (Path(checkpoint) / "tokenizer_config.json").exists():
            raise ValueError(
                f"{checkpoint} holds no tokenizer; pass export_student(..., tokenizer=...) the tokenizer of the encoder "
                "TaCL started from (its model card names it), or save it into the checkpoint with "
                "tokenizer.save_pretrained."
            )
        tokenizer = checkpoint
    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        tokenizer = load_tokenizer(tokenizer, fix="Pass the tokenizer of the encoder TaCL started from.")
    model = TaclForPreTraining.from_pretrained(checkpoint)
    model.save_student(output_dir, tokenizer=tokenizer)
    return Path(output_dir)

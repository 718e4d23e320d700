"""MAE-LM's masking, as a `DataCollatorForLanguageModeling`."""

from dataclasses import dataclass

from transformers import DataCollatorForLanguageModeling

from .reproducible_masking import ReproducibleMaskingMixin


@dataclass
class DataCollatorForMaeLm(ReproducibleMaskingMixin, DataCollatorForLanguageModeling):
    """15% of the real tokens, every one replaced by [MASK] (no 80/10/10).

    MAE-LM removes every [MASK] from the encoder input, so a selected token left unchanged or swapped for a
    random one would reach the encoder and be predicted from its own input. Special tokens and padding are
    never selected (the parent reads the tokenizer's special-tokens mask). Use `pad_to_multiple_of=8` for
    tensor-core friendly shapes.
    """

    mlm_probability: float = 0.15
    mask_replace_prob: float = 1.0
    random_replace_prob: float = 0.0

    def __post_init__(self):
        if not self.mlm:
            raise ValueError("DataCollatorForMaeLm is a masked-LM collator; it cannot run with mlm=False.")
        if self.tokenizer.mask_token is None:
            raise ValueError(
                f"The tokenizer {type(self.tokenizer).__name__} has no mask token, which MAE-LM needs. Add one with "
                "tokenizer.add_special_tokens({'mask_token': '[MASK]'}) and resize the model's embeddings."
            )
        super().__post_init__()

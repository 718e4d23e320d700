"""MAE-LM's masking, as a `DataCollatorForLanguageModeling`."""

from dataclasses import dataclass

from .reproducible_masking import MethodMaskingCollator


@dataclass
class DataCollatorForMaeLm(MethodMaskingCollator):
    """15% of the real tokens, every one replaced by [MASK] (no 80/10/10).

    MAE-LM removes every [MASK] from the encoder input, so a selected token left unchanged or swapped for a
    random one would reach the encoder and be predicted from its own input. Special tokens and padding are
    never selected (the parent reads the tokenizer's special-tokens mask). Use `pad_to_multiple_of=8` for
    tensor-core friendly shapes.
    """

    method_title = "MAE-LM"
    missing_mask_token_fix = (
        "add one with tokenizer.add_special_tokens({'mask_token': '[MASK]'}) and resize the model's embeddings."
    )
    mlm_probability: float = 0.15
    mask_replace_prob: float = 1.0
    random_replace_prob: float = 0.0

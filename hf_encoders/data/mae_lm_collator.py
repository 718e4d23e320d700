"""MAE-LM's masking, as a `DataCollatorForLanguageModeling`."""

from dataclasses import dataclass

import torch

from .reproducible_masking import MethodMaskingCollator


@dataclass
class DataCollatorForMaeLm(MethodMaskingCollator):
    """15% of the real tokens, every one replaced by [MASK] (no 80/10/10).

    MAE-LM removes every [MASK] from the encoder input, so a selected token left unchanged or swapped for a
    random one would reach the encoder and be predicted from its own input. Special tokens and padding are
    never selected (the parent reads the tokenizer's special-tokens mask). Use `pad_to_multiple_of=8` for
    tensor-core friendly shapes.

    With `masking="whole_word"` or `"span"`, every sub-token of a chosen word or span is masked, hence dropped from
    the encoder, and δ (`mask_in_encoder_fraction`, the paper's share of [MASK]s left in the encoder input) is
    decided per word or span: the batch's `masks_in_encoder` marks the [MASK]s that stay, and `MaeLmForMaskedLM` then
    draws nothing itself. With token masking δ stays the model's, drawn per token from
    `MaeLmConfig.mask_in_encoder_fraction`.
    """

    method_title = "MAE-LM"
    missing_mask_token_fix = (
        "add one with tokenizer.add_special_tokens({'mask_token': '[MASK]'}) and resize the model's embeddings."
    )
    mlm_probability: float = 0.15
    mask_replace_prob: float = 1.0
    random_replace_prob: float = 0.0
    mask_in_encoder_fraction: float = 0.0  # δ, per word or span

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 <= self.mask_in_encoder_fraction <= 1.0:
            raise ValueError(f"mask_in_encoder_fraction (δ) must lie in [0, 1], got {self.mask_in_encoder_fraction}.")
        if self.mask_in_encoder_fraction and self.masking == "token":
            raise ValueError(
                "With token masking δ is the model's (MaeLmConfig.mask_in_encoder_fraction, drawn per token); the "
                "collator's mask_in_encoder_fraction decides it per word or span: pass masking='whole_word' or 'span'."
            )

    def torch_call(self, examples):
        self.masks_in_encoder = None
        batch = super().torch_call(examples)
        if self.masks_in_encoder is not None:
            batch["masks_in_encoder"] = self.masks_in_encoder
        return batch

    def replace_units(self, inputs, masked, units):
        inputs, labels = super().replace_units(inputs, masked, units)
        if self.mask_in_encoder_fraction:
            # One draw per unit, after the masking's own: the same masks as with δ = 0, and a resumable choice.
            stays = torch.rand(inputs.shape, generator=self.generator) < self.mask_in_encoder_fraction
            self.masks_in_encoder = stays.gather(1, units) & masked
        return inputs, labels

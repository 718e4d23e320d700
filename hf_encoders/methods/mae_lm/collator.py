"""MAE-LM's masking, as a `DataCollatorForLanguageModeling`."""

from dataclasses import dataclass

import torch
from transformers.utils import logging

from ...data import index_tensors, masking_units
from ...data.reproducible_masking import MethodMaskingCollator

logger = logging.get_logger(__name__)


@dataclass
class DataCollatorForMaeLm(MethodMaskingCollator):
    """15% of the real tokens, every one replaced by [MASK] (no 80/10/10).

    MAE-LM removes every [MASK] from the encoder input, so a selected token left unchanged or swapped for a
    random one would reach the encoder and be predicted from its own input. Special tokens and padding are
    never selected (the parent reads the tokenizer's special-tokens mask). Use `pad_to_multiple_of=8` for
    tensor-core friendly shapes.

    δ (`mask_in_encoder_fraction`, the paper's share of [MASK]s left in the encoder input) is decided here too, per
    masking unit (token, word or span: an exact count of them with `mask_count="exact"`) and from the same seeded generator as the masks, so a batch keeps the
    same [MASK]s wherever and whenever it is collated: the batch's `masks_in_encoder` marks the [MASK]s that stay,
    and `MaeLmForMaskedLM` reads it and draws nothing itself (without the column, as from a stock collator, it
    keeps none: δ = 0, the paper's MAE-LM). With whole words or spans every sub-token of a chosen unit is masked,
    hence dropped from the encoder or kept in it together.
    """

    method_title = "MAE-LM"
    missing_mask_token_fix = (
        "add one with tokenizer.add_special_tokens({'mask_token': '[MASK]'}) and resize the model's embeddings."
    )
    mlm_probability: float = 0.15
    mask_replace_prob: float = 1.0
    random_replace_prob: float = 0.0
    mask_in_encoder_fraction: float = 0.0  # δ

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 <= self.mask_in_encoder_fraction <= 1.0:
            raise ValueError(
                f"mask_in_encoder_fraction (δ) must lie in [0, 1], got {self.mask_in_encoder_fraction}: 0 is MAE-LM, "
                "1 is standard MLM with a decoder."
            )
        if self.mask_in_encoder_fraction and self.return_tensors != "pt":
            raise ValueError("mask_in_encoder_fraction (δ) produces PyTorch tensors only; pass return_tensors='pt'.")
        if self.mask_replace_prob < 1.0:
            # Said here rather than by the model, which counts such targets only in batches without index tensors.
            logger.warning(
                f"DataCollatorForMaeLm(mask_replace_prob={self.mask_replace_prob}) leaves a share of the targets "
                "unmasked or randomised: MAE-LM's encoder reads those positions (it drops [MASK]s only), so it trains "
                "on a different objective, and an unchanged target can be copied rather than predicted."
            )

    def torch_call(self, examples):
        self.masks_in_encoder = None
        batch = super().torch_call(examples)
        if self.masks_in_encoder is not None:
            batch["masks_in_encoder"] = self.masks_in_encoder
        if self.index_tensors:
            # The positions the encoder reads, as MaeLmForMaskedLM.encoder_input_mask finds them.
            input_ids = batch["input_ids"]
            removed = input_ids == self.tokenizer.mask_token_id
            if self.masks_in_encoder is not None:
                removed &= ~self.masks_in_encoder
            keep = ~removed if "attention_mask" not in batch else batch["attention_mask"].bool() & ~removed
            slots = input_ids.shape[1]  # coins per token give no bound short of the whole row
            if self.counts_exactly():
                slots = index_tensors.kept_slots(slots, self.mlm_probability, self.mask_in_encoder_fraction)
            batch.update(index_tensors.kept_index(keep, slots))
        return batch

    def torch_mask_tokens(self, inputs, **kwargs):
        inputs, labels = super().torch_mask_tokens(inputs, **kwargs)
        if self.uses_parent_masking():
            self.masks_in_encoder = self.masks_kept_in_encoder(labels != -100)
        return inputs, labels

    def replace_units(self, inputs, masked, units):
        inputs, labels = super().replace_units(inputs, masked, units)
        self.masks_in_encoder = self.masks_kept_in_encoder(masked, units)
        return inputs, labels

    def masks_kept_in_encoder(self, masked: torch.Tensor, units: torch.Tensor | None = None) -> torch.Tensor | None:
        """δ's choice among the `masked` positions, one per unit (`units`: each position's unit's first position;
        every token its own unit without it), or None at δ = 0: floor(δ x masked units + u) of each row's masked
        units with `mask_count="exact"`, a coin per unit with `"per_token"`. Drawn after the masking's own draws: the
        same masks as with δ = 0, and a choice that is as reproducible as they are."""
        if not self.mask_in_encoder_fraction:
            return None
        if units is None:
            units = torch.arange(masked.shape[1]).expand_as(masked)
        if self.mask_count == "exact":
            masked_units = masked & (units == torch.arange(masked.shape[1]))
            stays = masking_units.choose_exact(masked_units, self.mask_in_encoder_fraction, self.generator)
        else:
            stays = torch.rand(masked.shape, generator=self.generator) < self.mask_in_encoder_fraction
        return stays.gather(1, units) & masked

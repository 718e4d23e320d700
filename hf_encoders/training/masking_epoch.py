"""`MaskingEpochCallback`: a reproducible collator draws fresh masks each epoch."""

from transformers import TrainerCallback

from ..data.reproducible_masking import ReproducibleMaskingMixin


class MaskingEpochCallback(TrainerCallback):
    """Tells a reproducible collator which epoch it is masking, so each epoch draws fresh masks."""

    def __init__(self, collator: ReproducibleMaskingMixin):
        self.collator = collator

    def on_epoch_begin(self, args, state, control, **kwargs):
        # state.epoch is the float count of completed epochs (restored from the checkpoint on resume).
        self.collator.epoch = int(state.epoch + 1e-9) if state.epoch else 0

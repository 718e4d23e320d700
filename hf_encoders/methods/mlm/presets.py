"""The MLM baseline's small-run settings (`hf-encoders pretrain --method mlm` from scratch); it has no paper preset."""

from ...training.presets import PROVISIONAL_SMALL_RUN

SMALL_RUNS = {"tiny": PROVISIONAL_SMALL_RUN, "small": PROVISIONAL_SMALL_RUN}

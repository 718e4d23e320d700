"""The MLM baseline's small-run settings (`hf-encoders pretrain --method mlm` from scratch); it has no paper preset."""

from ...training.presets import small_run_settings

# small collapses onto the plateau at tiny's rate and leaves it at a quarter of it.
SMALL_RUNS = {"tiny": small_run_settings(2e-3), "small": small_run_settings(5e-4)}

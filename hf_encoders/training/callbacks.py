"""The TrainerCallbacks of hf-encoders, by one public name (as transformers keeps its own in trainer_callback.py).

Callbacks control the run; what it measures is read by `PretrainingTrainer` (training/trainer.py) where the loss is
computed, and added to each log before any tracker sees it. The only state a callback sets on a model is a
training-time attribute (`PhaseScheduleCallback` sets `model.objective`), never its config, so a checkpoint's
config.json says what the model is, not what the run was doing when it was saved.

* `PhaseScheduleCallback` (phases.py): biphasic CLM -> MLM (or any phase list) by training step.
* `NonFiniteLossCallback` (numerics.py): stop at the first NaN/inf loss, before a checkpoint is written from poisoned
  weights.
* `PreemptionCallback` (preemption.py): on SIGTERM or SIGINT, save a complete checkpoint after the current step and
  stop.
* `CompleteUploadCallback`, `CheckpointBranchCallback` (hub_callbacks.py): every Hub push carries the model code and
  the model card; each checkpoint's model on a Hub branch of its own (`step-1000`).
* `DiagnosticsCallback` (diagnostics.py): the papers' representation diagnostics on held-out sentences, every N steps.
* `MaskingEpochCallback` (masking_epoch.py): tells a reproducible collator which epoch it masks.
* `EncoderHoldCallback` (encoder_hold.py): holds a pretrained encoder still for the first N steps, while the fresh
  decoder above it (MAE-LM continued from an encoder) learns to read it.

`LossTermsCallback`, `TaclLossLoggingCallback`, `PerplexityCallback` and `ThroughputCallback` (0.2) measured through
forward hooks; they are now settings of `PretrainingTrainer`, to which they pass themselves on (with a warning).
"""

import warnings

from transformers import TrainerCallback

from ..errors import NonFiniteLossError
from .diagnostics import DiagnosticsCallback, collapse
from .encoder_hold import EncoderHoldCallback
from .hub_callbacks import CheckpointBranchCallback, CompleteUploadCallback
from .masking_epoch import MaskingEpochCallback
from .measures import check_peak_tflops
from .numerics import NonFiniteLossCallback
from .phases import PhaseScheduleCallback
from .preemption import PreemptionCallback

__all__ = [
    "CheckpointBranchCallback",
    "CompleteUploadCallback",
    "DiagnosticsCallback",
    "EncoderHoldCallback",
    "LossTermsCallback",
    "MaskingEpochCallback",
    "NonFiniteLossCallback",
    "NonFiniteLossError",
    "PerplexityCallback",
    "PhaseScheduleCallback",
    "PreemptionCallback",
    "TaclLossLoggingCallback",
    "ThroughputCallback",
    "collapse",
]


class TrainerSetting(TrainerCallback):
    """A 0.2 measuring callback, now a keyword argument of `PretrainingTrainer`: given among its callbacks, it sets
    that argument and leaves the list; given to a plain `Trainer`, which cannot measure it, it stops the run."""

    def __init__(self, setting: str, value):
        self.setting, self.value = setting, value

    def configure_trainer(self, trainer) -> None:
        warnings.warn(
            f"{type(self).__name__} is deprecated: pass PretrainingTrainer({self.setting}={self.value!r}).",
            FutureWarning,
            stacklevel=3,
        )
        setattr(trainer, self.setting, self.value)

    def on_train_begin(self, args, state, control, **kwargs):
        raise TypeError(
            f"{type(self).__name__} needs hf_encoders.training.trainer.PretrainingTrainer, which measures "
            f"where the loss is computed: train with PretrainingTrainer({self.setting}={self.value!r}) instead of "
            "Trainer and this callback."
        )


class LossTermsCallback(TrainerSetting):
    """Deprecated: `PretrainingTrainer(loss_terms=terms)` logs these output fields of the model's forward."""

    def __init__(self, terms: tuple[str, ...]):
        super().__init__("loss_terms", tuple(terms))


class TaclLossLoggingCallback(LossTermsCallback):
    """Deprecated: `PretrainingTrainer` logs `tacl_loss`, `mlm_loss` and `nsp_loss` (every `*_loss` field)."""

    def __init__(self):
        super().__init__(("tacl_loss", "mlm_loss", "nsp_loss"))


class PerplexityCallback(TrainerSetting):
    """Deprecated: `PretrainingTrainer(perplexity_loss=loss)` logs `eval_perplexity`, exp of that loss."""

    def __init__(self, loss: str = "eval_loss"):
        super().__init__("perplexity_loss", loss)


class ThroughputCallback(TrainerSetting):
    """Deprecated: `PretrainingTrainer` logs `tokens_per_second` (and `mfu` with `peak_tflops`)."""

    def __init__(self, peak_tflops: float | None = None):
        check_peak_tflops(peak_tflops)
        super().__init__("peak_tflops", peak_tflops)

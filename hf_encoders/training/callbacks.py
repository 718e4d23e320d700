"""The shared TrainerCallbacks of hf-encoders, by one public name (as transformers keeps its own in
trainer_callback.py); a method's own callbacks live in its folder (`EncoderHoldCallback`: methods/mae_lm/,
`PhaseScheduleCallback`: methods/biphasic/), and `hf_encoders` exports them all.

Callbacks control the run; what it measures is read by `PretrainingTrainer` (training/trainer.py) where the loss is
computed, and added to each log before any tracker sees it. The only state a callback sets on a model is a
training-time attribute (`PhaseScheduleCallback` sets `model.objective`), never its config, so a checkpoint's
config.json says what the model is, not what the run was doing when it was saved. The one exception keeps that
promise: `RopeThetaScheduleCallback` changes the model itself (its rotary frequencies), so it writes the θ the
model now has.

* `NonFiniteLossCallback` (numerics.py): stop at the first NaN/inf loss, before a checkpoint is written from poisoned
  weights.
* `PreemptionCallback` (preemption.py): on SIGTERM or SIGINT, save a complete checkpoint after the current step and
  stop.
* `CompleteUploadCallback`, `CheckpointBranchCallback` (hub_callbacks.py): every Hub push carries the model code and
  the model card; each checkpoint's model on a Hub branch of its own (`step-1000`).
* `DiagnosticsCallback` (diagnostics.py): the papers' representation diagnostics on held-out sentences, every N steps.
* `MaskingEpochCallback` (masking_epoch.py): tells a reproducible collator which epoch it masks.
* `EmaCallback` (ema.py): an exponential moving average of the weights, on the device, in every checkpoint.
* `MlmProbabilityScheduleCallback`, `BatchSizeWarmupCallback`, `RopeThetaScheduleCallback` (schedules.py): the masking
  rate, the batch size and the RoPE θ by phase of the run; they choose in the main process what each step trains on
  (`PretrainingTrainer.get_batch_samples`).
"""

from .._moved import moved_attribute
from ..errors import NonFiniteLossError
from .diagnostics import DiagnosticsCallback, collapse
from .ema import EmaCallback
from .hub_callbacks import CheckpointBranchCallback, CompleteUploadCallback
from .masking_epoch import MaskingEpochCallback
from .numerics import NonFiniteLossCallback
from .preemption import PreemptionCallback

__all__ = [
    "CheckpointBranchCallback",
    "CompleteUploadCallback",
    "DiagnosticsCallback",
    "EmaCallback",
    "MaskingEpochCallback",
    "NonFiniteLossCallback",
    "NonFiniteLossError",
    "PreemptionCallback",
    "collapse",
]

# The methods' callbacks this module exported up to 0.2, by where they are now (`hf_encoders` exports them too).
_MOVED = {
    "EncoderHoldCallback": "hf_encoders.methods.mae_lm.encoder_hold:EncoderHoldCallback",
    "PhaseScheduleCallback": "hf_encoders.methods.biphasic.phases:PhaseScheduleCallback",
}


def __getattr__(name: str):
    return moved_attribute(__name__, name, _MOVED)

"""`EmaCallback`: an exponential moving average of the weights, kept on the training device.

The average is torch's `AveragedModel` with `get_ema_multi_avg_fn`: a copy of the model beside it, updated after each
optimizer step by one `lerp` per group of parameters (torch's foreach kernels), so no weight leaves the device during
training. The first update copies the weights; after it, `ema = decay * ema + (1 - decay) * weights`.

A checkpoint carries the average (`ema.safetensors`, written with the model's weights, before trainer_state.json marks
the checkpoint complete), and a resumed run reads it back, so it continues the average of the uninterrupted run. The
final average is written beside the final model as a folder of its own (`pretrain`: OUT/ema/).
"""

from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from transformers import TrainerCallback

EMA_FILE = "ema.safetensors"
EMA_FOLDER = "ema"


def check_ema_decay(decay: float) -> None:
    if not 0.0 < decay < 1.0:
        raise ValueError(
            f"--ema_decay must lie in (0, 1), got {decay}: the weight the average keeps at each step (0.999 averages "
            "over about the last 1,000 steps)."
        )


class EmaCallback(TrainerCallback):
    """Keeps `average`, an `AveragedModel` of the model trained, with `ema = decay * ema + (1 - decay) * weights`
    after every optimizer step (the first step's weights as its start). `resume_from`: the checkpoint a resumed run
    continues, whose `ema.safetensors` it reads. `PretrainingTrainer` writes `checkpoint_files` into every
    checkpoint."""

    def __init__(self, decay: float, resume_from: str | None = None):
        check_ema_decay(decay)
        self.decay, self.resume_from = decay, resume_from
        self.average: AveragedModel | None = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if args.fsdp:
            raise ValueError(
                "--ema_decay averages whole weights on each device, and FSDP shards them: drop --ema_decay or --fsdp."
            )
        self.average = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(self.decay), use_buffers=False)
        self.average.requires_grad_(False)
        if self.resume_from is not None:
            self.load(Path(self.resume_from))

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.average.update_parameters(model)

    def parameters(self) -> dict[str, torch.Tensor]:
        """The averaged weights by name (a tied weight once)."""
        return dict(self.average.module.named_parameters())

    def checkpoint_files(self, folder: Path) -> None:
        """`ema.safetensors` in a checkpoint: the average, its decay and how many steps it holds."""
        weights = {name: tensor.detach().contiguous() for name, tensor in self.parameters().items()}
        metadata = {"decay": repr(self.decay), "steps": str(int(self.average.n_averaged))}
        save_file(weights, folder / EMA_FILE, metadata=metadata)

    def load(self, checkpoint: Path) -> None:
        path = checkpoint / EMA_FILE
        if not path.is_file():
            raise ValueError(
                f"{checkpoint} holds no {EMA_FILE}: it was saved by a run without --ema_decay, so the average cannot "
                "continue; drop --ema_decay, or start a new run."
            )
        with safe_open(path, framework="pt") as saved:
            metadata = saved.metadata()
        if float(metadata["decay"]) != self.decay:
            raise ValueError(
                f"{checkpoint} averaged its weights with --ema_decay {metadata['decay']}, not {self.decay}: resume "
                f"with --ema_decay {metadata['decay']}, so that the average continues as it began."
            )
        weights = load_file(path)
        parameters = self.parameters()
        if set(weights) != set(parameters):
            raise ValueError(f"{path} does not average this model's weights: resume with the run's own model.")
        with torch.no_grad():
            for name, parameter in parameters.items():
                parameter.copy_(weights[name])
        self.average.n_averaged.fill_(int(metadata["steps"]))

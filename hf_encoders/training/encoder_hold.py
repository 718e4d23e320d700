"""`EncoderHoldCallback`: a pretrained encoder held still while the fresh decoder above it learns to read it.

MAE-LM continued from a pretrained encoder starts with a random decoder. While the decoder cannot read it yet, the
encoder's gradient is nearly the same at every position, and within a few hundred steps it pulls every state onto one
vector: the encoder collapses and the decoder learns without it (experiments/scan/SCAN.md, sections 3, 4 and 8). Held
for the first N steps, the encoder gets no gradient, so AdamW neither moves nor decays it, and it is released to a
decoder that already reads it. The word embeddings stay free: the LM head shares them, and it is as fresh as the decoder.
"""

import json
import logging
from pathlib import Path

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

logger = logging.getLogger(__name__)


def held_parameters(model) -> list:
    """The encoder's trainable parameters, less the input embeddings an LM head may share. Those frozen already (by
    the user, by PEFT) are left out, so that the release does not unfreeze them."""
    embeddings = model.get_input_embeddings().weight
    return [p for p in model.base_model.parameters() if p.requires_grad and p is not embeddings]


class EncoderHoldCallback(TrainerCallback, ExportableState):
    """Holds the base model (`model.base_model`, less the word embeddings an LM head shares) still for the first
    `steps` optimizer steps. Given again to a resumed run, it holds until the same step; its length is saved in each
    checkpoint's trainer_state.json (`state()`), so that `pretrain` can refuse a resume that leaves it out. Holding
    switches `requires_grad` off, which DDP allows only with `ddp_find_unused_parameters` (Trainer's default without
    gradient checkpointing), and FSDP and DeepSpeed, whose flattened parameters are trained as one, do not allow."""

    def __init__(self, steps: int):
        check_hold_steps(steps)
        self.steps = steps
        self.held = []

    def state(self) -> dict:
        return {"args": {"steps": self.steps}, "attributes": {}}

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        check_parallelism(args)
        if self.steps >= state.max_steps:
            logger.warning(
                f"The encoder is held for {self.steps} steps, the whole run ({state.max_steps} steps): only the "
                "decoder, the LM head and the word embeddings will train."
            )
        self.held = held_parameters(model)
        if state.global_step < self.steps:
            logger.warning(f"The encoder is held still until step {self.steps}, while the decoder learns to read it.")
        self.hold(state.global_step < self.steps)

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.steps:
            logger.warning(f"Step {self.steps}: the encoder is released and trains from now on.")
            self.hold(False)

    def on_train_end(self, args, state, control, **kwargs):
        # A run shorter than the hold leaves a model that trains as usual when the user takes it on.
        self.hold(False)

    def hold(self, still: bool) -> None:
        for parameter in self.held:
            parameter.requires_grad_(not still)


def check_hold_steps(steps: int) -> None:
    if steps < 1:
        raise ValueError(f"--hold_encoder_steps must be a positive number of steps, got {steps}.")


def check_resumed_hold(steps: int | None, checkpoint: str) -> None:
    """Refuse to resume a held run without its hold: the encoder would train where the run held it."""
    state_file = Path(checkpoint) / "trainer_state.json"
    saved = json.loads(state_file.read_text()).get("stateful_callbacks", {}) if state_file.exists() else {}
    held = saved.get(EncoderHoldCallback.__name__, {}).get("args", {}).get("steps")
    if held is None or held == steps:
        return
    if steps is None:
        raise ValueError(
            f"{checkpoint} comes from a run that held its encoder for the first {held} steps; pass "
            f"--hold_encoder_steps {held} again to continue it exactly."
        )
    logger.warning(f"{checkpoint} held its encoder for {held} steps; this run holds it for {steps}.")


def check_parallelism(args) -> None:
    if args.fsdp or args.deepspeed:
        raise ValueError(
            "--hold_encoder_steps switches the encoder's gradient off, which FSDP's and DeepSpeed's flattened "
            "parameters do not allow; hold the encoder on one device or with plain DDP (torchrun without --fsdp or "
            "--deepspeed)."
        )
    # Trainer's default: DDP looks for unused parameters unless the model checkpoints its activations.
    finds_unused = args.ddp_find_unused_parameters
    if finds_unused is None:
        finds_unused = not args.gradient_checkpointing
    if args.world_size > 1 and not finds_unused:
        raise ValueError(
            "--hold_encoder_steps leaves the encoder without a gradient, which DDP accepts only when it looks for "
            "unused parameters: pass --ddp_find_unused_parameters true."
        )

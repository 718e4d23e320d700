"""`EncoderHoldCallback`: a pretrained encoder held still while the fresh decoder above it learns to read it.

MAE-LM continued from a pretrained encoder starts with a random decoder. While the decoder cannot read it yet, the
encoder's gradient is nearly the same at every position, and within a few hundred steps it pulls every state onto one
vector: the encoder collapses and the decoder learns without it (experiments/scan/SCAN.md, sections 3, 4 and 8). Held
for the first N steps, the encoder gets no gradient, so AdamW neither moves nor decays it, and it is released to a
decoder that already reads it. The word embeddings stay free: the LM head shares them, and it is as fresh as the decoder.
"""

from transformers import TrainerCallback


def held_parameters(model) -> list:
    """The encoder's trainable parameters, less the input embeddings an LM head may share. Those frozen already (by
    the user, by PEFT) are left out, so that the release does not unfreeze them."""
    embeddings = model.get_input_embeddings().weight
    return [p for p in model.base_model.parameters() if p.requires_grad and p is not embeddings]


class EncoderHoldCallback(TrainerCallback):
    """Holds the base model (`model.base_model`) still for the first `steps` optimizer steps, also across a resume:
    a run resumed inside the hold is held until the same step. Holding switches `requires_grad` off, which DDP allows
    only with `ddp_find_unused_parameters` (Trainer's default without gradient checkpointing), and FSDP and DeepSpeed,
    whose flattened parameters are trained as one, do not allow at all."""

    def __init__(self, steps: int):
        check_hold_steps(steps)
        self.steps = steps
        self.held = []

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        check_parallelism(args)
        self.held = held_parameters(model)
        self.hold(state.global_step < self.steps)

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.steps:
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

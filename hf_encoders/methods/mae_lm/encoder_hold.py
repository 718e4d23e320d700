"""`EncoderHoldCallback`: a pretrained encoder held still while the fresh decoder above it learns to read it.

MAE-LM continued from a pretrained encoder starts with a random decoder. While the decoder cannot read it yet, the
encoder's gradient is nearly the same at every position, and it can pull every state onto one vector: the encoder
collapses and the decoder learns without it (experiments/REPORT.md, M from a pretrained start). Held
for the first N steps, the encoder gets no gradient, so AdamW neither moves nor decays it, and it is released to a
decoder that already reads it. The word embeddings stay free: the decoder reads its [MASK] embedding from them, and a
tied LM head, as fresh as the decoder, is them.
"""

import logging
from pathlib import Path

from accelerate.utils import parse_flag_from_env
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState, TrainerState

logger = logging.getLogger(__name__)

# The model card's line for a held run (`MaeLmRecipe.summary_lines`).
HOLD_SUMMARY = "- encoder held still for the first {steps} steps, while the decoder learned"


def held_steps(state: TrainerState) -> int | None:
    """The hold of the run whose state (a checkpoint's trainer_state.json) this is; None for a run without one."""
    return state.stateful_callbacks.get(EncoderHoldCallback.__name__, {}).get("args", {}).get("steps")


def held_parameters(model) -> list:
    """The encoder's trainable parameters, less the word embeddings. Those frozen already (by the user, by PEFT) are
    left out, so that the release does not unfreeze them. A PEFT model is unwrapped first: its own `base_model` is the
    whole network, decoder included."""
    network = model.get_base_model() if hasattr(model, "get_base_model") else model
    embeddings = network.get_input_embeddings().weight
    return [p for p in network.base_model.parameters() if p.requires_grad and p is not embeddings]


class EncoderHoldCallback(TrainerCallback, ExportableState):
    """Holds the base model (`model.base_model`, less the word embeddings) still for the first `steps` optimizer
    steps. Given again to a resumed run, it holds until the same step; its length is saved in each checkpoint's
    trainer_state.json (`state()`), so that `pretrain` can refuse a resume that leaves it out. Holding switches
    `requires_grad` off mid-run, which DDP allows only when it looks for unused parameters (Trainer's default without
    activation checkpointing) and its graph is not static; FSDP and DeepSpeed are refused, untested with it."""

    def __init__(self, steps: int):
        check_hold_steps(steps)
        self.steps = steps
        self.held = []
        self.holding = False

    def state(self) -> dict:
        return {"args": {"steps": self.steps}, "attributes": {}}

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        check_parallelism(args, model)
        if self.steps >= state.max_steps:
            announce(
                state,
                f"The encoder is held for {self.steps} steps, the whole run ({state.max_steps} steps): only the "
                "decoder, the LM head and the word embeddings will train.",
            )
        # A loop that stopped inside the hold (an exception, auto_find_batch_size's retry) left the encoder frozen,
        # where the next loop would no longer count it as trainable: release it before choosing what to hold.
        self.hold(False)
        self.held = held_parameters(model)
        if state.global_step < self.steps:
            announce(state, f"The encoder is held still until step {self.steps}, while the decoder learns to read it.")
            self.hold(True)

    def on_step_begin(self, args, state, control, **kwargs):
        if self.holding and state.global_step >= self.steps:
            announce(state, f"Step {self.steps}: the encoder is released and trains from now on.")
            self.hold(False)

    def on_train_end(self, args, state, control, **kwargs):
        # A run shorter than the hold leaves a model that trains as usual when the user takes it on.
        self.hold(False)

    def hold(self, still: bool) -> None:
        for parameter in self.held:
            parameter.requires_grad_(not still)
        self.holding = still


def announce(state, message: str) -> None:
    """Say it once, from the main process: each DDP rank runs the callback."""
    if state.is_world_process_zero:
        logger.warning(message)


def check_hold_steps(steps: int) -> None:
    if steps < 1:
        raise ValueError(f"--hold_encoder_steps must be a positive number of steps, got {steps}.")


def check_resumed_hold(steps: int | None, checkpoint: str, restores_callback_states: bool = False) -> None:
    """Refuse to resume a run inside its hold without it (the encoder would train where the run held it), and warn
    where the resumed run holds the encoder for another length than the checkpoint's run. With Trainer's
    `restore_callback_states_from_checkpoint`, the callback comes back with the checkpoint's length, so another one
    given is refused rather than silently dropped."""
    state_file = Path(checkpoint) / "trainer_state.json"
    if not state_file.exists():
        return
    state = TrainerState.load_from_json(str(state_file))
    held = held_steps(state)
    if held == steps or max(held or 0, steps or 0) <= state.global_step:
        return  # the same hold, or one that ended before the checkpoint: it continues exactly
    if steps is None:
        raise ValueError(
            f"{checkpoint} (step {state.global_step}) comes from a run that held its encoder for the first {held} "
            f"steps; pass --hold_encoder_steps {held} again to continue it exactly."
        )
    if restores_callback_states and held is not None:
        raise ValueError(
            f"--restore_callback_states_from_checkpoint brings back {checkpoint}'s hold ({held} steps), not "
            f"--hold_encoder_steps {steps}: pass --hold_encoder_steps {held}, or leave the restore off."
        )
    before = "trained its encoder from the first step" if held is None else f"held its encoder for {held} steps"
    logger.warning(f"{checkpoint} {before}; this run holds it until step {steps}.")


def check_parallelism(args, model) -> None:
    """Refuse the settings under which a parameter cannot stop and start getting a gradient mid-run."""
    # `accelerate launch`'s config (or an Accelerator given a plugin) chooses them through the environment instead.
    chosen_in_environment = parse_flag_from_env("ACCELERATE_USE_FSDP") or parse_flag_from_env(
        "ACCELERATE_USE_DEEPSPEED"
    )
    if args.fsdp or args.deepspeed or chosen_in_environment:
        raise ValueError(
            "--hold_encoder_steps switches the encoder's gradient off mid-run, which is untested with FSDP and "
            "DeepSpeed (their sharded parameters and optimizer states); hold the encoder on one device or with plain "
            "DDP (torchrun without --fsdp or --deepspeed)."
        )
    if args.world_size == 1:
        return
    # Trainer's own rule: DDP looks for unused parameters unless the model checkpoints its activations.
    finds_unused = args.ddp_find_unused_parameters
    if finds_unused is None:
        finds_unused = not (getattr(model, "is_activation_checkpointing", False) or args.activation_checkpointing)
    if not finds_unused:
        raise ValueError(
            "--hold_encoder_steps leaves the encoder without a gradient, which DDP accepts only when it looks for "
            "unused parameters: pass --ddp_find_unused_parameters true."
        )
    if args.ddp_static_graph:
        raise ValueError(
            "--hold_encoder_steps changes which parameters get a gradient at the release, which a static DDP graph "
            "assumes never happens: leave --ddp_static_graph unset."
        )

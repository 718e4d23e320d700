"""Schedules by training step: `VALUE:FRACTION,...` over max_steps, and the callbacks that put them in force.

Every schedule is a pure function of the optimizer step (`state.global_step`) and `state.max_steps`: a resumed run
restores the step, so it lands in the right phase, and every DDP rank has the same step, so all ranks agree. Nothing is
set on a collator while the run trains: dataloader workers collate batches ahead of time, in other processes, from a
copy of the collator made when their epoch began. So, as biphasic's phase schedule does with its two views, what
depends on the step is chosen in the main process, where the trainer fetches the micro-batches of a step
(`PretrainingTrainer.get_batch_samples` asks each callback with `batches_for_step`):

* `MlmProbabilityScheduleCallback` (`--mlm_probability_schedule 0.3:0.9,0.15:0.1`): the collator masks every batch at
  each rate the schedule names (each mask still a function of seed, epoch and batch: data/reproducible_masking.py), and
  the step keeps the masks of the rate in force, logged as `mlm_probability`.
* `BatchSizeWarmupCallback` (`--batch_size_warmup_tokens N`): a step trains on as many of its
  `gradient_accumulation_steps` micro-batches as the warm-up allows, growing linearly from one to all of them over the
  first N tokens; every micro-batch keeps its shape, and the loss is normalised over those trained.
* `RopeThetaScheduleCallback` (the θ of `--block_size_schedule 128:0.9,512:0.1:160000`): the rotary frequencies of
  each phase, set on the model at the start of each step, as biphasic's phase schedule sets its objective. The
  lengths themselves, and `--anneal_corpus`, are data planned before the run (training/phased_blocks.py).
"""

import math
from dataclasses import dataclass
from typing import Any

import torch
from transformers import TrainerCallback

from ..data.reproducible_masking import BATCHES_BY_MLM_PROBABILITY


@dataclass(frozen=True)
class StepSchedule:
    """Values by fraction of max_steps, in order: `((value, fraction), ...)`, the fractions summing to 1.

    Phase k ends at step round((f_1 + ... + f_k) * max_steps), halves rounding up (the last phase at max_steps exactly),
    so boundaries are deterministic. `name` names the schedule in its errors ("phase", "--mlm_probability_schedule").
    """

    phases: tuple[tuple[Any, float], ...]
    name: str = "phase"

    def __post_init__(self):
        for value, fraction in self.phases:
            if not 0.0 < fraction <= 1.0:
                raise ValueError(f"{self.title} {value}:{fraction:g} must have a fraction of max_steps in (0, 1].")
        total = sum(fraction for _, fraction in self.phases)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(
                f"The {self.name} fractions must sum to 1 (they cover max_steps), got {total:g}: {self.text}."
            )

    @property
    def title(self) -> str:
        return self.name[0].upper() + self.name[1:]

    @property
    def text(self) -> str:
        return ",".join(f"{value}:{fraction:g}" for value, fraction in self.phases)

    @classmethod
    def parse(cls, text: str, name: str, value_name: str, example: str, value=float) -> "StepSchedule":
        """`VALUE:FRACTION,...`; `value` converts (and checks) each VALUE, raising ValueError with the reason."""
        phases = []
        for item in filter(None, (part.strip() for part in text.split(","))):
            raw, _, fraction = item.partition(":")
            try:
                fraction = float(fraction)
            except ValueError:
                raise ValueError(
                    f"{name[0].upper() + name[1:]} {item!r} is not {value_name}:FRACTION; write e.g. {example!r}."
                ) from None
            phases.append((value(raw.strip()), fraction))
        if not phases:
            raise ValueError(f"The {name} names no phase; write {value_name}:FRACTION items, e.g. {example!r}.")
        return cls(tuple(phases), name)

    @property
    def values(self) -> tuple:
        """Each value once, in the order the phases first name it."""
        return tuple(dict.fromkeys(value for value, _ in self.phases))

    def boundaries(self, max_steps: int) -> list[tuple[Any, int, int]]:
        """(value, first step, end step) per phase; steps count from 0 like `global_step` before the step."""
        spans, start, cumulative = [], 0, 0.0
        for index, (value, fraction) in enumerate(self.phases):
            cumulative += fraction
            # The last phase ends at max_steps exactly, whatever the float sum of the fractions.
            end = max_steps if index == len(self.phases) - 1 else int(cumulative * max_steps + 0.5)
            spans.append((value, start, end))
            start = end
        return spans

    def value_at(self, step: int, max_steps: int):
        """The value of the optimizer step that starts at `global_step == step`."""
        for value, _, end in self.boundaries(max_steps):
            if step < end:
                return value
        return self.phases[-1][0]

    def switch_steps(self, max_steps: int) -> list[int]:
        """The first step of every phase after the first."""
        return [start for _, start, _ in self.boundaries(max_steps)[1:]]

    def check_steps(self, max_steps: int) -> None:
        """Refuse a schedule one of whose phases gets no step in a run of `max_steps`."""
        empty = [(value, start) for value, start, end in self.boundaries(max_steps) if end == start]
        if empty:
            raise ValueError(
                f"With max_steps={max_steps}, the phases {empty} of {self.text} get no step; train longer or merge "
                "phases."
            )


def mlm_probability(text: str) -> float:
    try:
        rate = float(text)
    except ValueError:
        rate = math.nan
    if not 0.0 < rate < 1.0:
        raise ValueError(f"--mlm_probability_schedule: the rate {text!r} must be a number in (0, 1), e.g. 0.15.")
    return rate


def parse_mlm_probability_schedule(text: str) -> StepSchedule:
    """`--mlm_probability_schedule 0.3:0.9,0.15:0.1`: masking rate by fraction of max_steps."""
    return StepSchedule.parse(text, "--mlm_probability_schedule", "RATE", "0.3:0.9,0.15:0.1", value=mlm_probability)


class ScheduleLogging(TrainerCallback):
    """Closes the logging window at every switch, so that no training log mixes two phases of `self.schedule`."""

    schedule: StepSchedule

    def on_step_end(self, args, state, control, **kwargs):
        # global_step now counts the step just taken: if the next step opens a phase, log now.
        if state.global_step in self.schedule.switch_steps(state.max_steps):
            control.should_log = True


class MlmProbabilityScheduleCallback(ScheduleLogging):
    """Trains each step on the masks of the rate its phase of `schedule` names, and logs it as `mlm_probability`.

    The collator (with `mlm_probabilities` set to `schedule.values`) masks every batch at each rate; the trainer keeps,
    in the main process, the masks of the rate of the step the batch is trained in.
    """

    def __init__(self, schedule: StepSchedule):
        self.schedule = schedule

    def on_train_begin(self, args, state, control, **kwargs):
        self.schedule.check_steps(state.max_steps)

    def batches_for_step(self, state, batches: list) -> list:
        rate = self.schedule.value_at(state.global_step, state.max_steps)
        return [batch if isinstance(batch, SkippedMicroBatch) else self.masked_at(batch, rate) for batch in batches]

    def masked_at(self, batch, rate: float):
        if BATCHES_BY_MLM_PROBABILITY not in batch:
            raise ValueError(
                f"The masking schedule {self.schedule.text} needs batches masked at each of its rates: give the "
                f"collator (a ReproducibleMaskingMixin one) mlm_probabilities={self.schedule.values}."
            )
        return batch[BATCHES_BY_MLM_PROBABILITY][rate]

    def measures_for_log(self, state, logs: dict) -> dict:
        if "loss" not in logs:
            return {}
        return {"mlm_probability": self.schedule.value_at(state.global_step - 1, state.max_steps)}


class SkippedMicroBatch(dict):
    """A micro-batch slot that a batch-size warm-up step leaves out: no forward, no backward, no tokens.

    Trainer counts `gradient_accumulation_steps` slots to a step (when it steps the optimizer, which micro-batches it
    skips on resume), so the slot stays, empty: an `input_ids` of no tokens, which Trainer's FLOP and token counts read
    as none.
    """

    def __init__(self):
        super().__init__(input_ids=torch.empty(0, dtype=torch.long))


def check_warmup_accumulation(accumulation: int) -> None:
    if accumulation < 2:
        raise ValueError(
            "--batch_size_warmup_tokens grows the batch through gradient accumulation, from one micro-batch to "
            f"--gradient_accumulation_steps of them; pass --gradient_accumulation_steps 2 or more (got {accumulation})."
        )


class BatchSizeWarmupCallback(TrainerCallback):
    """The batch grows linearly, in micro-batches, from one to `gradient_accumulation_steps` of them over the first
    `tokens` tokens trained on (`--batch_size_warmup_tokens`).

    The step that starts when the run has trained on τ tokens takes 1 + floor((G - 1) τ / tokens) of its G
    micro-batches, at most G; its other micro-batches are read, in the data's order, and not trained on, so that the
    data, the steps and a resume stay Trainer's (which counts G micro-batches to every step). Each micro-batch has
    `tokens_per_micro_batch` tokens (every rank's sequences, each block_size long). Logged: `batch_size`, the
    sequences of the step just taken, over all ranks.
    """

    def __init__(self, tokens: int, block_size: int):
        if tokens < 1:
            raise ValueError(f"--batch_size_warmup_tokens must be a positive number of tokens, got {tokens}.")
        self.tokens, self.block_size = tokens, block_size
        self.micro_batches: list[int] = []  # per warm-up step; every later step takes all G
        self.accumulation = self.sequences_per_micro_batch = 1

    def on_train_begin(self, args, state, control, **kwargs):
        check_warmup_accumulation(args.gradient_accumulation_steps)
        self.accumulation = args.gradient_accumulation_steps
        self.sequences_per_micro_batch = args.per_device_train_batch_size * args.world_size
        self.micro_batches = self.warmup_steps(self.sequences_per_micro_batch * self.block_size)

    def warmup_steps(self, tokens_per_micro_batch: int) -> list[int]:
        """The micro-batches of each step before the batch reaches its full size."""
        steps, trained = [], 0
        while (
            count := min(self.accumulation, 1 + (self.accumulation - 1) * trained // self.tokens)
        ) < self.accumulation:
            steps.append(count)
            trained += count * tokens_per_micro_batch
        return steps

    def micro_batches_at(self, step: int) -> int:
        return self.micro_batches[step] if step < len(self.micro_batches) else self.accumulation

    def batches_for_step(self, state, batches: list) -> list:
        skipped = max(0, len(batches) - self.micro_batches_at(state.global_step))
        # The slots left out come first: the step's last micro-batch is where DDP reduces the gradients.
        return [SkippedMicroBatch() for _ in range(skipped)] + batches[: len(batches) - skipped]

    def measures_for_log(self, state, logs: dict) -> dict:
        if "loss" not in logs:
            return {}
        return {"batch_size": self.micro_batches_at(state.global_step - 1) * self.sequences_per_micro_batch}


@dataclass(frozen=True)
class BlockPhase:
    """A phase of `--block_size_schedule`: its block length, and the RoPE θ it trains with (None: the model's)."""

    length: int
    rope_theta: float | None = None

    def __str__(self) -> str:
        return str(self.length) if self.rope_theta is None else f"{self.length} (θ {self.rope_theta:g})"


def parse_block_size_schedule(text: str) -> StepSchedule:
    """`--block_size_schedule 128:0.9,512:0.1:160000`: LENGTH:FRACTION[:ROPE_THETA] items, in order."""
    name, example = "--block_size_schedule", "128:0.9,512:0.1:160000"
    phases = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        fields = item.split(":")
        try:
            if len(fields) not in (2, 3):
                raise ValueError
            length, fraction = int(fields[0]), float(fields[1])
            theta = float(fields[2]) if len(fields) == 3 else None
        except ValueError:
            raise ValueError(
                f"{name} {item!r} is not LENGTH:FRACTION or LENGTH:FRACTION:ROPE_THETA; write e.g. {example!r}."
            ) from None
        if length < 2 or (theta is not None and not theta > 0):
            raise ValueError(f"{name} {item!r}: the length must be 2 tokens or more and θ positive, e.g. {example!r}.")
        phases.append((BlockPhase(length, theta), fraction))
    if not phases:
        raise ValueError(f"The {name} names no phase; write LENGTH:FRACTION items, e.g. {example!r}.")
    return StepSchedule(tuple(phases), name)


def longest_block(text: str) -> int:
    return max(phase.length for phase, _ in parse_block_size_schedule(text).phases)


class RopeThetaScheduleCallback(ScheduleLogging):
    """Puts in force the RoPE θ of each phase of a block-size schedule: in the config (a checkpoint saved in a phase is a
    model of that θ, and loads as one) and in every rotary embedding's inverse frequencies, in the main process, at
    the start of each step. A phase without θ trains with the model's own. Logged: `rope_theta`."""

    def __init__(self, schedule: StepSchedule):
        self.schedule = schedule
        self.rotary: list = []
        self.initial_theta = self.theta_in_force = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.schedule.check_steps(state.max_steps)
        self.rotary = [
            module for module in model.modules() if hasattr(module, "inv_freq") and hasattr(module, "config")
        ]
        if not self.rotary:
            raise ValueError(
                f"{self.schedule.text} sets a RoPE θ, which needs a model with rotary position embeddings (biphasic); "
                f"{type(model).__name__} has none."
            )
        self.initial_theta = self.theta_in_force = self.rotary[0].config.rope_parameters["rope_theta"]
        self.set_theta(self.theta_at(state.global_step, state.max_steps))

    def theta_at(self, step: int, max_steps: int) -> float:
        theta = self.schedule.value_at(step, max_steps).rope_theta
        return self.initial_theta if theta is None else theta

    def on_step_begin(self, args, state, control, **kwargs):
        self.set_theta(self.theta_at(state.global_step, state.max_steps))

    def set_theta(self, theta: float) -> None:
        if theta == self.theta_in_force:
            return
        for module in self.rotary:
            module.config.rope_parameters["rope_theta"] = theta
            fresh = type(module)(module.config)
            with torch.no_grad():
                module.inv_freq.copy_(fresh.inv_freq)
                module.original_inv_freq.copy_(fresh.original_inv_freq)
            module.attention_scaling = fresh.attention_scaling
        self.theta_in_force = theta

    def measures_for_log(self, state, logs: dict) -> dict:
        if "loss" not in logs:
            return {}
        return {"rope_theta": self.theta_at(state.global_step - 1, state.max_steps)}

"""`PhaseScheduleCallback`: biphasic CLM -> MLM (or any phase list) by training step."""

from ...models.biphasic.configuration_biphasic import OBJECTIVES
from ...training.schedules import ScheduleLogging, StepSchedule


def check_objective(objective: str) -> str:
    if objective not in OBJECTIVES:
        raise ValueError(f"Unknown objective {objective!r} in the phase schedule; use {' or '.join(OBJECTIVES)}.")
    return objective


def objective_modules(model) -> list:
    """The modules whose class declares an `objective` switch. Set on them, not on `model`: Trainer hands callbacks a
    wrapper where one is in place (a PeftModel, FSDP1), and an attribute set on the wrapper would not reach them."""
    if model is None:
        return []
    return [module for module in model.modules() if getattr(type(module), "objective", None) in OBJECTIVES]


class PhaseScheduleCallback(ScheduleLogging):
    """Switch a biphasic model between objectives by training step: by default CLM for the first 25% of max_steps,
    then MLM. Phases are (objective, fraction of max_steps), in order; alternation such as clm, mlm, clm, mlm is
    allowed.

    How the phase reaches the computation, and why it survives what breaks a collator flag:

    * The phase is a pure function of `state.global_step` and `state.max_steps`. A resumed run restores
      global_step, so it continues in the right phase; every DDP rank has the same global_step, so all ranks agree.
    * It is applied to the MODEL, in the main process (`model.objective`, set in `on_step_begin`), never to the
      collator: data-loader workers and prefetching collate batches ahead of time in other processes. The collator
      (`DataCollatorForBiphasic`, default `objective=None`) therefore puts both views in every batch and the model
      picks one at forward time.
    * The learning-rate schedule is untouched: the paper's PFS recipe is ONE warmup-stable-decay schedule over the
      whole run (`lr_scheduler_type="warmup_stable_decay"`, `lr_scheduler_kwargs={"num_decay_steps": ...,
      "decay_type": "linear"}`), so MLM resumes from a CLM model that has not decayed.

    Logging: a log is forced on the last step of every phase, so no logging window mixes objectives, and each
    training log gets `clm_loss` or `mlm_loss` (equal to that window's `loss`, the cross-rank mean Trainer computed)
    so the two curves stay separate; an evaluation log gets `eval_clm_loss` or `eval_mlm_loss` likewise.
    `PretrainingTrainer` adds them to the log before any callback or tracker sees it (`measures_for_log`); under a
    plain `Trainer` the schedule still runs, without these keys.

    Phase boundaries are those of every step schedule (training/schedules.py, `StepSchedule`).
    Drives any model whose `objective` attribute selects its loss (`BiphasicEncoderForPreTraining`). The attribute
    is training state: it is never written into the model's config, so a checkpoint saved mid-phase is the same
    encoder as any other.
    """

    def __init__(self, phases=(("clm", 0.25), ("mlm", 0.75))):
        self.switched = []  # the modules whose `objective` this run sets (on_train_begin)
        phases = tuple((objective, float(fraction)) for objective, fraction in phases)
        if not phases:
            raise ValueError("PhaseScheduleCallback needs at least one phase, e.g. [('clm', 0.25), ('mlm', 0.75)].")
        for objective, _ in phases:
            check_objective(objective)
        self.schedule = StepSchedule(phases)

    @classmethod
    def from_string(cls, text: str) -> "PhaseScheduleCallback":
        """'clm:0.25,mlm:0.75' (the `--phases` syntax of `hf-encoders pretrain`)."""
        if not text.strip(" ,"):
            return cls(())
        return cls(StepSchedule.parse(text, "phase", "OBJECTIVE", "clm:0.25,mlm:0.75", value=check_objective).phases)

    @property
    def phases(self) -> tuple[tuple[str, float], ...]:
        return self.schedule.phases

    def boundaries(self, max_steps: int) -> list[tuple[str, int, int]]:
        """(objective, first step, end step) per phase; steps count from 0 like `global_step` before the step."""
        return self.schedule.boundaries(max_steps)

    def objective_at(self, step: int, max_steps: int) -> str:
        """The objective of the optimizer step that starts at `global_step == step`."""
        return self.schedule.value_at(step, max_steps)

    def on_train_begin(self, args, state, control, model=None, train_dataloader=None, **kwargs):
        self.switched = objective_modules(model)
        if not self.switched:
            raise ValueError(
                f"PhaseScheduleCallback drives a model whose `objective` attribute picks CLM or MLM "
                f"(BiphasicEncoderForPreTraining); got {type(model).__name__}."
            )
        self.schedule.check_steps(state.max_steps)
        self.check_collator(train_dataloader)
        self.switch_to(self.objective_at(state.global_step, state.max_steps))

    def check_collator(self, train_dataloader) -> None:
        """A one-view DataCollatorForBiphasic would feed the other phase the wrong batches: refuse it."""
        collator = getattr(train_dataloader, "collate_fn", None)
        collator = getattr(collator, "data_collator", collator)  # Trainer's RemoveColumnsCollator wraps it
        fixed = getattr(collator, "objective", None)
        needed = {objective for objective, _ in self.phases}
        if fixed is not None and needed != {fixed}:
            raise ValueError(
                f"The phase schedule trains {sorted(needed)} but the collator only builds {fixed!r} batches; "
                "use DataCollatorForBiphasic(tokenizer) (objective=None), which builds both views."
            )

    def on_step_begin(self, args, state, control, **kwargs):
        self.switch_to(self.objective_at(state.global_step, state.max_steps))

    def on_train_end(self, args, state, control, **kwargs):
        # Back to the class default (the encoder's MLM), as the model reads once saved and loaded again.
        for module in self.switched:
            vars(module).pop("objective", None)

    def switch_to(self, objective: str) -> None:
        for module in self.switched:
            module.objective = objective

    def measures_for_log(self, state, logs: dict) -> dict:
        """`clm_loss` or `mlm_loss` for a training log, `eval_clm_loss` or `eval_mlm_loss` for an evaluation's
        (`PretrainingTrainer.log` asks): the objective of the step just taken, the one a training log covers and the
        one an evaluation ran with."""
        objective = self.objective_at(state.global_step - 1, state.max_steps)
        return {loss.replace("loss", f"{objective}_loss"): logs[loss] for loss in ("loss", "eval_loss") if loss in logs}

"""Every TrainerCallback of hf-encoders, in one public module (as transformers keeps its own in trainer_callback.py).

Callbacks observe the run and log; the only state they set on a model is a training-time attribute
(`PhaseScheduleCallback` sets `model.objective`), never its config, so a checkpoint's config.json says what the model
is, not what the run was doing when it was saved.

* `LossTermsCallback`: a method's separate loss terms (TaCL's three, ...) in every training and evaluation log.
* `PerplexityCallback`: exp of the validation loss in every evaluation log.
* `DiagnosticsCallback`: the papers' representation diagnostics on held-out sentences, every N steps.
* `ThroughputCallback`: real tokens per second, and MFU where the device's peak is known, in every training log.
* `PhaseScheduleCallback`: biphasic CLM -> MLM (or any phase list) by training step.
* `NonFiniteLossCallback`: stop at the first NaN/inf loss, before a checkpoint is written from poisoned weights.
* `CompleteUploadCallback`: every Hub push carries the model code and the model card.
* `CheckpointBranchCallback`: each checkpoint's model on a Hub branch of its own (`step-1000`).
* `PreemptionCallback`: on SIGTERM or SIGINT, save a complete checkpoint after the current step and stop.
* `MaskingEpochCallback`: tells a reproducible collator which epoch it masks.
"""

import math
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import TrainerCallback, TrainerState
from transformers.dynamic_module_utils import custom_object_save
from transformers.trainer_pt_utils import find_batch_size
from transformers.trainer_utils import HubStrategy
from transformers.utils import logging

from ..analysis import layerwise_report
from ..analysis.plots import TRAINING_DIAGNOSTICS
from ..data.reproducible_masking import ReproducibleMaskingMixin
from ..errors import NonFiniteLossError
from ..models.biphasic.configuration_biphasic import OBJECTIVES
from .hub import push_branch, stage_checkpoint_model

logger = logging.get_logger(__name__)


def add_to_log(state: TrainerState, logs: dict, measures: dict) -> None:
    """Into the log (the callbacks after this one, the printer) and into the history record Trainer appended just
    before calling `on_log` (trainer_state.json, the loss curves)."""
    logs.update(measures)
    state.log_history[-1].update(measures)


def reduced_over_ranks(tensor: torch.Tensor, op=None) -> torch.Tensor:
    """`tensor` summed (or reduced with `op`) over the processes of a distributed run; itself in a single process."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(tensor, op=op or torch.distributed.ReduceOp.SUM)
    return tensor


class TrainingForwardsCallback(TrainerCallback):
    """Base of the callbacks that read the model's training forwards (`record(module, inputs, output)`, `inputs` the
    keyword arguments Trainer passed), through a forward hook held for the duration of `train()`, so that nothing is
    kept inside the model. With `records_evaluation`, the evaluations Trainer runs during `train()` are recorded too
    (the module is then in eval mode); the diagnostics' forwards never are (they call the encoder inside)."""

    _hook = None
    records_evaluation = False

    def record(self, module, inputs, output) -> None:
        raise NotImplementedError

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.remove_hook()
        if model is not None:
            self._hook = model.register_forward_hook(self._record_forward, with_kwargs=True)

    def on_train_end(self, args, state, control, **kwargs):
        self.remove_hook()

    def remove_hook(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def _record_forward(self, module, args, inputs, output):
        if module.training or self.records_evaluation:
            self.record(module, inputs, output)


class LossTermsCallback(TrainingForwardsCallback):
    """Adds the mean of each named loss term since the previous log to every training log (`tacl_loss`, ...), and
    over the evaluation to every evaluation log (`eval_tacl_loss`, ...).

    The terms are read from what the model's forward already returns (a `ModelOutput` field per term), by a forward
    hook on training forwards, as sentence-transformers' trainer tracks its losses: nothing is kept inside the
    model. Sums stay on the device, so recording costs no host-device sync; they are read when Trainer logs. Under
    DDP the means are averaged over ranks, as Trainer averages `loss`, so the terms still add up to it. A term a
    forward returns as None (TaCL's NSP with NSP off) is left out.

    The terms reach `state.log_history` (trainer_state.json, loss curves) and every callback after this one;
    reporting integrations (TensorBoard, W&B) run before user callbacks, so for them insert this one first:
    `trainer.callback_handler.callbacks.insert(0, callback)`.
    """

    records_evaluation = True
    PREFIXES = {"loss": "", "eval_loss": "eval_"}  # the key that marks a log as training or evaluation: its prefix

    def __init__(self, terms: tuple[str, ...]):
        self.terms = tuple(terms)
        self._reset()

    def _reset(self) -> None:
        # Sums and counts per prefix: training forwards since the last log, evaluation forwards since the last one.
        self._sums: dict[str, dict[str, torch.Tensor]] = {prefix: {} for prefix in self.PREFIXES.values()}
        self._counts: dict[str, dict[str, int]] = {prefix: {} for prefix in self.PREFIXES.values()}

    def record(self, module, inputs, output):
        prefix = "" if module.training else "eval_"
        # Trainer's eval_loss weighs each batch by its rows (a short last batch counts less); so do the terms.
        weight = 1 if module.training else find_batch_size(inputs)
        sums, counts = self._sums[prefix], self._counts[prefix]
        for name in self.terms:
            value = getattr(output, name, None)
            if isinstance(value, torch.Tensor):
                value = value.detach().float() * weight
                sums[name] = sums[name] + value if name in sums else value
                counts[name] = counts.get(name, 0) + weight

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._reset()
        super().on_train_begin(args, state, control, model=model, **kwargs)

    def on_log(self, args, state, control, logs=None, **kwargs):
        prefix = next((prefix for key, prefix in self.PREFIXES.items() if key in (logs or {})), None)
        if prefix is None or not self._sums[prefix]:
            return
        sums, counts = self._sums[prefix], self._counts[prefix]
        names = list(sums)
        means = reduced_over_ranks(torch.stack([sums[name] / counts[name] for name in names]))
        self._sums[prefix], self._counts[prefix] = {}, {}
        add_to_log(state, logs, {prefix + name: mean for name, mean in zip(names, (means / args.world_size).tolist())})


class TaclLossLoggingCallback(LossTermsCallback):
    """`tacl_loss`, `mlm_loss` and `nsp_loss` (when NSP is on) of `TaclForPreTraining` in every training log."""

    def __init__(self):
        super().__init__(("tacl_loss", "mlm_loss", "nsp_loss"))


class PerplexityCallback(TrainerCallback):
    """Adds `eval_perplexity`, exp of the evaluation's language-modelling loss, to every evaluation log (run_mlm.py
    reports it once, after training). `loss` names that loss in the log: `eval_loss` where it is the whole loss,
    `eval_mlm_loss` for TaCL, whose `eval_loss` adds the contrastive and NSP terms. Put it after the callback that
    logs that term."""

    def __init__(self, loss: str = "eval_loss"):
        self.loss = loss

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.loss in (logs or {}):
            try:
                perplexity = math.exp(logs[self.loss])
            except OverflowError:
                perplexity = math.inf
            add_to_log(state, logs, {"eval_perplexity": perplexity})


def probed_encoder(model: torch.nn.Module) -> torch.nn.Module:
    """What fine-tuning gets of a pre-training model: its base model (TaCL: its student's), out of a PeftModel."""
    model = model.get_base_model() if hasattr(model, "get_base_model") else model
    return getattr(model, "student", model).base_model


# The top layer has collapsed when its tokens span at most this many dimensions, or are this alike within a sentence.
COLLAPSED_RANK = 2
COLLAPSED_SIMILARITY = 0.95


def collapse(measures: dict) -> str | None:
    """Which collapse test the top layer's diagnostics fail, in words (its tokens close to one vector, or spanning
    almost no directions), with the other measure; None where neither fails."""
    rank, similarity = measures.get("effective_rank"), measures.get("self_similarity")
    if rank is None or similarity is None:
        return None
    one_vector = f"self-similarity {similarity:.2f}"
    few_directions = f"effective rank {rank:g}"
    failed = []
    if similarity >= COLLAPSED_SIMILARITY:
        failed.append(f"its tokens are close to one vector ({one_vector} >= {COLLAPSED_SIMILARITY})")
        one_vector = ""
    if rank <= COLLAPSED_RANK:
        failed.append(f"its tokens span at most {COLLAPSED_RANK} directions ({few_directions} <= {COLLAPSED_RANK})")
        few_directions = ""
    if not failed:
        return None
    passed = one_vector or few_directions  # the measure of the test that did not fire, if one did not
    return " and ".join(failed) + (f"; {passed} is not collapsed" if passed else "")


class DiagnosticsCallback(TrainerCallback):
    """Every `every` steps and at the last, the papers' diagnostics of the encoder on a fixed probe set of held-out
    sentences (`hf_encoders.analysis.layerwise_report`, 15% of real tokens masked for the "with [MASK]" rank), added
    to that step's training log: the last layer's `self_similarity`, `effective_rank` and
    `effective_rank_with_mask`, and every layer's as `<name>/layer_<l>` (0: embeddings).
    `hf_encoders.analysis.plot_training_diagnostics` draws them. A top layer that has collapsed after warm-up
    (`collapse`) gets a warning, once, with what to try.

    The probe runs the encoder inside the model (not the pre-training model's forward, so no loss is recorded), in
    eval mode and inference mode with its own generator: the run trains exactly as without it. It runs on the main
    process, while the other ranks go on to the next step, which waits for it.
    """

    def __init__(self, every: int, tokenizer, sentences: list[str], max_length: int = 128):
        if every < 1:
            raise ValueError(f"--diagnostics_steps must be a positive number of steps, got {every}.")
        if not sentences:
            raise ValueError("The diagnostics need a probe set of sentences; none was given.")
        self.every, self.tokenizer, self.sentences, self.max_length = every, tokenizer, sentences, max_length
        self._measures: dict[str, float] = {}
        self.warned_of_collapse = False

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if not (due(state.global_step, self.every) or state.global_step == state.max_steps):
            return
        control.should_log = True  # every rank: the training log reduces the loss over the ranks
        if state.is_world_process_zero:
            started = time.perf_counter()
            self._measures = self.measure(model)
            self._measures["diagnostics_runtime"] = round(time.perf_counter() - started, 4)
            if state.global_step > args.get_warmup_steps(state.max_steps):
                self.warn_of_collapse(state.global_step)

    def warn_of_collapse(self, step: int) -> None:
        """Once per run: a warm-up's large early updates can collapse a fresh encoder for good."""
        symptoms = collapse(self._measures)
        if symptoms and not self.warned_of_collapse:
            self.warned_of_collapse = True
            logger.warning(
                f"Step {step}: the encoder's top layer has collapsed: {symptoms}. "
                "Try a lower --learning_rate or a longer warm-up (--warmup_steps)."
            )

    def measure(self, model) -> dict[str, float]:
        report = layerwise_report(
            probed_encoder(model), self.tokenizer, self.sentences, max_length=self.max_length, progress=False
        )
        measures = {}
        for name in TRAINING_DIAGNOSTICS:
            per_layer = getattr(report, name)
            measures[name] = per_layer[-1]
            measures.update({f"{name}/layer_{layer}": value for layer, value in enumerate(per_layer)})
        return measures

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self._measures and "loss" in (logs or {}):
            add_to_log(state, logs, self._measures)
            self._measures = {}


# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity), by a name `torch.cuda.get_device_name` contains.
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}


class ThroughputCallback(TrainingForwardsCallback):
    """Adds `tokens_per_second` to every training log: real tokens (the attention mask's, padding excluded) of the
    training forwards since the previous log, summed over processes, over the wall-clock time between the logs less
    the evaluations' and diagnostics' (their logs' `eval_runtime` and `diagnostics_runtime`).
    With the device's dense peak known (`peak_tflops`, else `PEAK_TFLOPS` for the GPU in use) it adds `mfu`:
    model FLOPs per second over the peak of all processes, counting 6 FLOPs per trained parameter and token and 2 per
    frozen one (TaCL's teacher). That is the usual approximation: attention scores, and the [MASK] positions MAE-LM's
    encoder skips, are not counted; bench/run.py counts both. Counts stay on the device between logs (no sync).
    """

    def __init__(self, peak_tflops: float | None = None):
        if peak_tflops is not None and peak_tflops <= 0:
            raise ValueError(f"--peak_tflops must be positive (the device's dense TFLOP/s), got {peak_tflops}.")
        self.peak_tflops = peak_tflops
        self._tokens = None
        self._since = self._not_training = 0.0
        self.flops_per_token = 0

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._tokens, self._since, self._not_training = None, time.perf_counter(), 0.0
        parameters = model.parameters() if model is not None else ()
        self.flops_per_token = sum(p.numel() * (6 if p.requires_grad else 2) for p in parameters)
        if self.peak_tflops is None and torch.cuda.is_available():
            name = torch.cuda.get_device_name()
            self.peak_tflops = next((peak for gpu, peak in PEAK_TFLOPS.items() if gpu in name), None)
        super().on_train_begin(args, state, control, model=model, **kwargs)

    def record(self, module, inputs, output):
        mask, ids = inputs.get("attention_mask"), inputs.get("input_ids")
        if mask is None and ids is None:
            return
        count = mask.sum() if mask is not None else torch.tensor(ids.numel(), device=ids.device)
        self._tokens = count.detach() if self._tokens is None else self._tokens + count.detach()

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        # Time spent evaluating (after the previous training log) or probing is not training time.
        self._not_training += logs.get("eval_runtime", 0.0) + logs.get("diagnostics_runtime", 0.0)
        if "loss" not in logs:
            return
        now = time.perf_counter()
        tokens = self._tokens if self._tokens is not None else torch.zeros((), device=args.device)
        training_seconds = max(now - self._since - self._not_training, 1e-9)
        per_second = float(reduced_over_ranks(tokens.to(args.device))) / training_seconds
        measures = {"tokens_per_second": round(per_second, 1)}
        if self.peak_tflops:
            measures["mfu"] = round(per_second * self.flops_per_token / (self.peak_tflops * 1e12 * args.world_size), 4)
        self._tokens, self._since, self._not_training = None, now, 0.0
        add_to_log(state, logs, measures)


def objective_modules(model) -> list:
    """The modules whose class declares an `objective` switch. Set on them, not on `model`: Trainer hands callbacks a
    wrapper where one is in place (a PeftModel, FSDP1), and an attribute set on the wrapper would not reach them."""
    if model is None:
        return []
    return [module for module in model.modules() if getattr(type(module), "objective", None) in OBJECTIVES]


class PhaseScheduleCallback(TrainerCallback):
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
    so the two curves stay separate; an evaluation log gets `eval_clm_loss` or `eval_mlm_loss` likewise. The key
    reaches `state.log_history` (trainer_state.json) and every callback after this one, including the progress bar
    and printer; reporting integrations (TensorBoard, W&B) run before user callbacks, so insert this callback first
    (`trainer.callback_handler.callbacks.insert(0, callback)`) for them.

    Phase k ends at step round(f_1 + ... + f_k) * max_steps (halves round up), so boundaries are deterministic.
    Drives any model whose `objective` attribute selects its loss (`BiphasicEncoderForPreTraining`). The attribute
    is training state: it is never written into the model's config, so a checkpoint saved mid-phase is the same
    encoder as any other.
    """

    def __init__(self, phases=(("clm", 0.25), ("mlm", 0.75))):
        self.switched = []  # the modules whose `objective` this run sets (on_train_begin)
        phases = tuple((objective, float(fraction)) for objective, fraction in phases)
        if not phases:
            raise ValueError("PhaseScheduleCallback needs at least one phase, e.g. [('clm', 0.25), ('mlm', 0.75)].")
        for objective, fraction in phases:
            if objective not in OBJECTIVES:
                raise ValueError(
                    f"Unknown objective {objective!r} in the phase schedule; use {' or '.join(OBJECTIVES)}."
                )
            if not 0.0 < fraction <= 1.0:
                raise ValueError(f"Phase {objective}:{fraction} must have a fraction of max_steps in (0, 1].")
        total = sum(fraction for _, fraction in phases)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"The phase fractions must sum to 1 (they cover max_steps), got {total:g}: {phases}.")
        self.phases = phases

    @classmethod
    def from_string(cls, text: str) -> "PhaseScheduleCallback":
        """'clm:0.25,mlm:0.75' (the `--phases` syntax of `hf-encoders pretrain`)."""
        phases = []
        for item in filter(None, (part.strip() for part in text.split(","))):
            objective, _, fraction = item.partition(":")
            try:
                phases.append((objective.strip(), float(fraction)))
            except ValueError:
                raise ValueError(f"Phase {item!r} is not OBJECTIVE:FRACTION; write e.g. 'clm:0.25,mlm:0.75'.") from None
        return cls(phases)

    def boundaries(self, max_steps: int) -> list[tuple[str, int, int]]:
        """(objective, first step, end step) per phase; steps count from 0 like `global_step` before the step."""
        spans, start, cumulative = [], 0, 0.0
        for index, (objective, fraction) in enumerate(self.phases):
            cumulative += fraction
            # The last phase ends at max_steps exactly, whatever the float sum of the fractions.
            end = max_steps if index == len(self.phases) - 1 else int(cumulative * max_steps + 0.5)
            spans.append((objective, start, end))
            start = end
        return spans

    def objective_at(self, step: int, max_steps: int) -> str:
        """The objective of the optimizer step that starts at `global_step == step`."""
        for objective, _, end in self.boundaries(max_steps):
            if step < end:
                return objective
        return self.phases[-1][0]

    def on_train_begin(self, args, state, control, model=None, train_dataloader=None, **kwargs):
        self.switched = objective_modules(model)
        if not self.switched:
            raise ValueError(
                f"PhaseScheduleCallback drives a model whose `objective` attribute picks CLM or MLM "
                f"(BiphasicEncoderForPreTraining); got {type(model).__name__}."
            )
        empty = [(objective, start) for objective, start, end in self.boundaries(state.max_steps) if end == start]
        if empty:
            raise ValueError(
                f"With max_steps={state.max_steps}, the phases {empty} get no step; train longer or merge phases."
            )
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

    def on_step_end(self, args, state, control, **kwargs):
        # global_step now counts the step just taken: if the next step opens a phase, close the logging window.
        if any(start == state.global_step for _, start, _ in self.boundaries(state.max_steps)[1:]):
            control.should_log = True

    def on_log(self, args, state, control, logs=None, **kwargs):
        # The objective of the step just taken: the one a training log covers, and the one an evaluation ran with.
        objective = self.objective_at(state.global_step - 1, state.max_steps)
        for loss in ("loss", "eval_loss"):
            if loss in (logs or {}):
                add_to_log(state, logs, {loss.replace("loss", f"{objective}_loss"): logs[loss]})


HINTS = (
    "lower the learning rate or lengthen the warmup; keep gradient clipping on (max_grad_norm, default 1.0); "
    "train in bf16 instead of fp16 (fp16 overflows above 65504); check the data for empty or degenerate batches "
    "(a sequence of padding only, labels outside the vocabulary)"
)


class NonFiniteLossCallback(TrainingForwardsCallback):
    """Stop a Trainer run at the first NaN/inf training loss, before it writes a checkpoint from poisoned weights: the
    last good checkpoint is kept.

    Why Trainer alone does not: by default (`logging_nan_inf_filter=True`) a non-finite step loss is replaced by the
    running mean before it is logged, so the logs look healthy while the weights, after one optimizer step on NaN
    gradients, are NaN; every later checkpoint then overwrites a good one with garbage.

    How `NonFiniteLossCallback` sees the real loss without a host-device sync per step:

    * a forward hook on the model (installed in `on_train_begin`) reads `outputs.loss` of every training forward and
      folds "was it finite" into a few device tensors (the first bad step and its value); this launches tiny kernels
      but never waits for the device;
    * the flag is read (one sync) only when Trainer is about to log, evaluate, save or stop, i.e. when it syncs anyway,
      or every `check_every_n_steps` steps if you ask for it. Between two checks a poisoned run goes on training (it
      never saves); the error still names the first bad step;
    * before a checkpoint is written the weights themselves are checked as well: a step can have a finite loss but
      NaN/inf gradients (an overflow in backward), which only shows in the next step's loss;
    * `on_log` also checks the logged `loss` and `grad_norm`, which covers losses computed outside the model (a custom
      `compute_loss`) when `logging_nan_inf_filter=False`. A non-finite `grad_norm` is not an error with `fp16=True`:
      there the gradient scaler skips such steps by design.

    What happens then: the callback sets `should_save = False` and `should_training_stop = True` and raises
    `NonFiniteLossError` (a `RuntimeError`) from the callback, inside `trainer.train()`. Trainer has no exception handler
    around its loop, so nothing after the raise runs: no checkpoint is written for the bad step, no final save,
    `on_train_end` callbacks (and a script's `trainer.save_model()` after `train()`) are skipped, and the process exits
    with a non-zero status. The newest `checkpoint-*` folder is the last good state; resume from it
    (`resume_from_checkpoint=True`) after changing what the message suggests.

    `check_every_n_steps`: None (default) checks only when Trainer logs, evaluates, saves or stops, adding no
    host-device sync of its own; an integer also checks every that many steps (one sync each), so a run with
    sparse logging stops sooner after the bad step. The error names the first step whose loss was not finite.
    """

    def __init__(self, check_every_n_steps: int | None = None):
        if check_every_n_steps is not None and check_every_n_steps < 1:
            raise ValueError(f"check_every_n_steps must be a positive integer or None, got {check_every_n_steps}.")
        self.check_every_n_steps = check_every_n_steps
        self._step = 0
        self._reset()

    def _reset(self):
        # Device-side record of the first non-finite loss: seen (bool), its step (int64) and value (float32).
        self._seen = self._first_step = self._first_value = None

    # ---- recording (no sync) ----

    def record(self, module, inputs, output):
        loss = output.get("loss") if hasattr(output, "get") else None
        if not isinstance(loss, torch.Tensor):
            return
        with torch.no_grad():
            value = loss.detach().float().sum()  # NaN and inf survive the sum; a scalar loss is itself
            if self._seen is None:
                self._seen = torch.zeros((), dtype=torch.bool, device=value.device)
                self._first_step = torch.zeros((), dtype=torch.long, device=value.device)
                self._first_value = torch.zeros((), dtype=torch.float32, device=value.device)
            bad = ~torch.isfinite(value)
            first = bad & ~self._seen
            self._first_step = torch.where(first, torch.full_like(self._first_step, self._step), self._first_step)
            self._first_value = torch.where(first, value, self._first_value)
            self._seen = self._seen | bad

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._reset()
        self._step = state.global_step
        super().on_train_begin(args, state, control, model=model, **kwargs)

    def on_step_begin(self, args, state, control, **kwargs):
        self._step = state.global_step + 1  # the step whose forwards come next (all micro-batches of it)

    # ---- checking (one sync, only when Trainer is about to act on the state) ----

    def on_step_end(self, args, state, control, model=None, **kwargs):
        # Trainer's own schedule is recomputed here rather than read from `control` alone, so the check happens
        # before a save even when this callback runs before DefaultFlowCallback (which sets the flags).
        step = state.global_step
        last = step >= state.max_steps > 0
        saving = control.should_save or (args.save_strategy == "steps" and (due(step, state.save_steps) or last))
        acting = (
            saving
            or last
            or control.should_log
            or control.should_evaluate
            or control.should_training_stop
            or (args.logging_strategy == "steps" and due(step, state.logging_steps))
            or (args.eval_strategy == "steps" and due(step, state.eval_steps))
            or due(step, self.check_every_n_steps)
        )
        if acting:
            self._check(state, control, model if saving or args.save_strategy == "best" else None)

    def on_epoch_end(self, args, state, control, model=None, **kwargs):
        # Trainer logs, evaluates and saves once more after this event (epoch strategies, and the end of training).
        self._check(state, control, model if args.save_strategy != "no" else None)

    def on_log(self, args, state, control, logs=None, **kwargs):
        self._check(state, control)
        logs = logs or {}
        loss = logs.get("loss")
        if isinstance(loss, (int, float)) and not math.isfinite(loss):
            self._stop(control, f"The training loss logged at step {state.global_step} is {loss}.")
        grad_norm = logs.get("grad_norm")
        if isinstance(grad_norm, (int, float)) and not math.isfinite(grad_norm) and not args.fp16:
            self._stop(
                control,
                f"The gradient norm at step {state.global_step} is {grad_norm} (the loss was finite): "
                "the optimizer step has made the weights non-finite.",
            )

    def _check(self, state, control, model=None):
        if self._seen is not None and bool(self._seen):
            step, value = int(self._first_step), float(self._first_value)
            self._stop(
                control, f"The training loss became {value} at step {step} (detected at step {state.global_step})."
            )
        if model is not None and not weights_are_finite(model):
            self._stop(
                control,
                f"The weights became non-finite at or before step {state.global_step} although every "
                "training loss was finite: the gradients overflowed in backward, or the update did.",
            )

    def _stop(self, control, what: str):
        control.should_save = False
        control.should_evaluate = False
        control.should_training_stop = True
        self.remove_hook()
        raise NonFiniteLossError(
            f"{what} Training stopped before saving: the newest checkpoint-* folder is the last good state "
            f"(resume from it with resume_from_checkpoint). To fix: {HINTS}."
        )


def weights_are_finite(model: torch.nn.Module) -> bool:
    """Whether every parameter is free of NaN/inf (one host-device sync)."""
    checks = []
    for parameter in model.parameters():
        local = parameter.to_local() if hasattr(parameter, "to_local") else parameter  # a DTensor shard
        if local.is_floating_point() and local.numel():
            checks.append(torch.isfinite(local.detach()).all())
    return bool(torch.stack([check.to(checks[0].device) for check in checks]).all()) if checks else True


def due(step: int, every: int | None) -> bool:
    return bool(every) and step % every == 0


class PreemptionCallback(TrainerCallback):
    """On SIGTERM (what SLURM and preemptible clouds send before they kill a job) or SIGINT (Ctrl-C): finish the
    optimizer step under way, save a complete checkpoint and stop, so `trainer.train()` returns normally and
    `resume_from_checkpoint` continues exactly. A second signal gets the handler that was there before (the default
    kills). Under torchrun every rank stops after the same step: each step the flag is reduced over the ranks (one
    integer), since the signal may reach them on either side of a step boundary.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.received: str | None = None  # the name of the signal that stopped the run
        self._previous = {}

    def on_train_begin(self, args, state, control, **kwargs):
        self.received = None
        if threading.current_thread() is threading.main_thread():  # Python sets handlers from the main thread only
            self._previous = {number: signal.signal(number, self._handle) for number in self.SIGNALS}

    def _handle(self, number, frame):
        self.received = signal.Signals(number).name
        signal.signal(number, self._previous.get(number, signal.SIG_DFL))

    def on_step_end(self, args, state, control, **kwargs):
        if self.stop_requested(args):
            control.should_save = True
            control.should_training_stop = True

    def stop_requested(self, args) -> bool:
        requested = self.received is not None
        if args.world_size > 1:
            flag = reduced_over_ranks(
                torch.tensor([int(requested)], device=args.device), torch.distributed.ReduceOp.MAX
            )
            if flag.item() and not requested:
                self.received = "a signal to another rank"
            requested = bool(flag.item())
        return requested

    def on_train_end(self, args, state, control, **kwargs):
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}


class CompleteUploadCallback(TrainerCallback):
    """Trainer's mid-training push (`push_to_hub=True`) copies only config and weights from the checkpoint into
    `output_dir` before uploading it. A model of ours also needs its code files (the config's auto_map points at
    them, and run_glue opens the upload with `trust_remote_code`) and an up-to-date card; `on_push_begin` runs
    right before that copy, so both are in place when the upload starts.
    """

    def __init__(self, write_card: Callable[[Path, TrainerState], object] | None = None):
        self.write_card = write_card

    def on_push_begin(self, args, state, control, model=None, **kwargs):
        output_dir = Path(args.output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        if getattr(model, "_auto_class", None) is not None:  # a registered custom model: ship its folder's code
            custom_object_save(model, output_dir)
        if self.write_card is not None:
            self.write_card(output_dir, state)


class CheckpointBranchCallback(TrainerCallback):
    """With `push_to_hub`, each checkpoint's model also goes to a branch of the repository named after its step
    (`step-1000`), with its card, so `from_pretrained(repo, revision="step-1000")` loads the model as it was then.
    Trainer's own mid-training push only ever replaces main. The optimizer and RNG states stay local (a branch is
    for loading, not resuming; `hub_strategy="checkpoint"` pushes those). Uploads run in the background and are
    waited for when training ends, before the final push.
    """

    def __init__(self, repo_id: str, write_card: Callable[[Path, TrainerState], object] | None = None):
        self.repo_id, self.write_card = repo_id, write_card
        self.uploads = []

    @staticmethod
    def branch(step: int) -> str:
        return f"step-{step}"

    def on_save(self, args, state, control, **kwargs):
        if not (args.push_to_hub and state.is_world_process_zero) or args.hub_strategy == HubStrategy.END:
            return
        branch = self.branch(state.global_step)
        output_dir = Path(args.output_dir)
        staged = stage_checkpoint_model(output_dir / f"checkpoint-{state.global_step}", output_dir / f"_{branch}")
        if self.write_card is not None:
            self.write_card(staged, state)
        try:
            self.uploads.append((branch, push_branch(self.repo_id, staged, branch, token=args.hub_token)))
        except Exception as error:  # a Hub hiccup must not end a run whose checkpoint is safe on disk
            shutil.rmtree(staged, ignore_errors=True)
            logger.warning(f"Could not push {branch} to {self.repo_id} ({error}); the checkpoint is kept locally.")

    def on_train_end(self, args, state, control, **kwargs):
        # Waited for before the final push; a failed upload is reported, not raised: the run's end (final model,
        # card, push) matters more than one intermediate branch.
        for branch, upload in self.uploads:
            if upload.exception() is not None:
                logger.warning(f"Pushing {branch} to {self.repo_id} failed: {upload.exception()}")
        self.uploads = []


class MaskingEpochCallback(TrainerCallback):
    """Tells a reproducible collator which epoch it is masking, so each epoch draws fresh masks."""

    def __init__(self, collator: ReproducibleMaskingMixin):
        self.collator = collator

    def on_epoch_begin(self, args, state, control, **kwargs):
        # state.epoch is the float count of completed epochs (restored from the checkpoint on resume).
        self.collator.epoch = int(state.epoch + 1e-9) if state.epoch else 0

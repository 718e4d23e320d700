"""`PretrainingTrainer`: Trainer with the measures of pre-training read where the loss is computed.

As sentence-transformers' trainer tracks its loss components, `compute_loss` reads what each forward returns: the
method's loss terms (TaCL's three, any `*_loss` field of the output), the real tokens it trained on and whether its
loss is finite. `log()` adds the terms, `eval_perplexity`, throughput and what the control callbacks measured
(biphasic's per-objective loss, the diagnostics probe) to the log before `Trainer.log` hands it on, so every tracker
(`report_to`), `state.log_history` and every callback get the same log, whatever the order of the callbacks.
"""

from itertools import islice
from pathlib import Path

import torch
from transformers import Trainer
from transformers.trainer_pt_utils import find_batch_size

from .measures import TermMeans, Throughput, check_peak_tflops, loss_terms, perplexity
from .numerics import NonFiniteLossCallback
from .resume import CHECKPOINT_PATTERN
from .schedules import SkippedMicroBatch


class PretrainingTrainer(Trainer):
    """`Trainer` that logs what pre-training measures, and evaluates with masks that do not move.

    * `loss_terms`: the output fields logged as loss terms, as their mean since the previous training log (`tacl_loss`)
      and over each evaluation (`eval_tacl_loss`, each batch weighted by its rows, as Trainer's `eval_loss`); None
      (default): every `*_loss` field the model's output has. Under DDP the means are averaged over ranks, as Trainer
      averages `loss`, so the terms still add up to it.
    * `perplexity_loss`: the evaluation log's language-modelling loss, whose exp is `eval_perplexity` (`eval_loss`;
      TaCL's `eval_mlm_loss`, as its `eval_loss` adds the contrastive and NSP terms; biphasic's `eval_mlm_loss`, so
      an evaluation in its CLM phase logs no masked-LM perplexity).
    * `peak_tflops`: the device's dense peak for `mfu` (`measures.Throughput`); known GPUs' by default.
    * `eval_data_collator`: the collator of evaluations, whose masks do not move with the training epoch, so the
      validation curve compares like with like.

    A `NonFiniteLossCallback` among the callbacks gets every training loss; a callback with a
    `measures_for_log(state, logs)` method adds what it returns to every log; one with a
    `checkpoint_files(folder)` method writes its state into every checkpoint (`EmaCallback`: the average); one with a
    `batches_for_step(state, batches)` method chooses, in the main process, what each step trains on out of the
    micro-batches the loader gave it (training/schedules.py: the masks of the rate in force, the micro-batches a
    batch-size warm-up leaves out).
    """

    def __init__(
        self,
        *args,
        eval_data_collator=None,
        loss_terms: tuple[str, ...] | None = None,
        perplexity_loss: str = "eval_loss",
        peak_tflops: float | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        check_peak_tflops(peak_tflops)
        self.eval_data_collator = eval_data_collator
        self.loss_terms = tuple(loss_terms) if loss_terms is not None else None
        self.perplexity_loss, self.peak_tflops = perplexity_loss, peak_tflops
        self.training_terms, self.evaluation_terms = TermMeans(), TermMeans()
        self.throughput: Throughput | None = None
        self.trained_micro_batches: int | None = None  # of the step under way (get_batch_samples)
        if self.compute_metrics is None:
            # Its evaluations read losses only: the masked-LM heads may keep their training layout (labelled rows)
            # rather than compute the (batch, length, vocab) logits that metrics need.
            for module in self.model.modules():
                if hasattr(type(module), "compact_eval_logits"):
                    module.compact_eval_logits = True

    # ---- measuring ----

    def train(self, *args, **kwargs):
        self.training_terms, self.throughput = TermMeans(), Throughput(self.model, self.peak_tflops)
        return super().train(*args, **kwargs)

    def evaluate(self, *args, **kwargs):
        self.evaluation_terms = TermMeans()  # this evaluation's forwards only
        return super().evaluate(*args, **kwargs)

    # ---- schedules ----

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        batches = list(islice(epoch_iterator, num_batches))
        for callback in self.callback_handler.callbacks:
            if hasattr(callback, "batches_for_step"):
                batches = callback.batches_for_step(self.state, batches)
        trained = [batch for batch in batches if not isinstance(batch, SkippedMicroBatch)]
        self.trained_micro_batches = len(trained)
        # The loss is normalised over the labels of the micro-batches trained on (Trainer counts them here).
        _, num_items_in_batch = super().get_batch_samples(iter(trained), len(trained), device)
        return batches, num_items_in_batch

    def training_step(self, model, inputs, num_items_in_batch=None):
        if isinstance(inputs, SkippedMicroBatch):
            return torch.zeros((), device=self.args.device)
        if self.trained_micro_batches is not None:
            # Trainer divides the loss by the micro-batches it fetched (unless the model normalises it by
            # num_items_in_batch): by those trained on, so that a step's loss is their mean.
            self.current_gradient_accumulation_steps = self.trained_micro_batches
        return super().training_step(model, inputs, num_items_in_batch)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        terms = loss_terms(outputs, self.loss_terms)
        if model.training:
            self.training_terms.add(terms)
            if self.throughput is not None:
                self.throughput.add(inputs)
            for callback in self.callback_handler.callbacks:
                if isinstance(callback, NonFiniteLossCallback):
                    callback.record(loss, step=self.state.global_step + 1)  # the step these forwards belong to
        else:
            self.evaluation_terms.add(terms, weight=find_batch_size(inputs))
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        world_size = self.args.world_size
        if "loss" in logs:
            logs.update(self.training_terms.pop(world_size))
        if "eval_loss" in logs:
            logs.update(self.evaluation_terms.pop(world_size, prefix="eval_"))
        for callback in self.callback_handler.callbacks:
            if hasattr(callback, "measures_for_log"):
                logs.update(callback.measures_for_log(self.state, logs))
        if self.perplexity_loss in logs:  # after the callbacks: the phase schedule names biphasic's eval_mlm_loss
            logs["eval_perplexity"] = perplexity(logs[self.perplexity_loss])
        if self.throughput is not None:  # last: it sets the probe's time (`diagnostics_runtime`) aside
            logs.update(self.throughput.pop(logs, self.args.device, world_size))
        super().log(logs, start_time)

    # ---- evaluating, checkpointing and resuming ----

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        super().save_model(output_dir, _internal_call=_internal_call)
        # A checkpoint gets its weights first and trainer_state.json last (training/resume.py): what a callback
        # writes here is in every checkpoint that resuming takes for complete.
        folder = Path(output_dir or self.args.output_dir)
        if self.args.should_save and CHECKPOINT_PATTERN.match(folder.name):
            for callback in self.callback_handler.callbacks:
                if hasattr(callback, "checkpoint_files"):
                    callback.checkpoint_files(folder)

    def _issue_warnings_after_load(self, load_result) -> None:
        """On resume, a tied weight (MAE-LM's vocabulary projection, the input embedding itself) is not in the
        checkpoint by design: Trainer would call it missing at every resume. It is tied again; anything else
        missing is still reported."""
        tied = set(getattr(self.model, "all_tied_weights_keys", None) or {})
        if tied & set(load_result.missing_keys):
            self.model.tie_weights()
            load_result.missing_keys[:] = [key for key in load_result.missing_keys if key not in tied]
        super()._issue_warnings_after_load(load_result)

    def _set_signature_columns_if_needed(self):
        # Word boundaries are not a model input, but whole-word and span masking read them in the collator.
        super()._set_signature_columns_if_needed()
        if "word_starts" not in self._signature_columns:
            self._signature_columns.append("word_starts")

    def get_eval_dataloader(self, eval_dataset=None):
        if self.eval_data_collator is None:
            return super().get_eval_dataloader(eval_dataset)
        # Trainer builds every loader from `self.data_collator`; lend it the evaluation's for this one.
        training_collator, self.data_collator = self.data_collator, self.eval_data_collator
        try:
            return super().get_eval_dataloader(eval_dataset)
        finally:
            self.data_collator = training_collator

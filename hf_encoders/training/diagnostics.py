"""`DiagnosticsCallback`: the papers' representation diagnostics on held-out sentences, every N steps, and the
collapse test that warns of them."""

import time

import torch
from transformers import TrainerCallback
from transformers.utils import logging

from ..analysis import layerwise_report
from ..analysis.plots import TRAINING_DIAGNOSTICS
from .numerics import due

logger = logging.get_logger(__name__)


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
    sentences (`hf_encoders.analysis.layerwise_report`, 15% of real tokens masked for the "with [MASK]" rank), which
    `PretrainingTrainer` adds to that step's training log: the last layer's `self_similarity`, `effective_rank` and
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
        """Once per run: a fresh encoder often narrows to one vector while it learns token frequencies; too high a
        rate for its size keeps it there, and too low a rate as well."""
        symptoms = collapse(self._measures)
        if symptoms and not self.warned_of_collapse:
            self.warned_of_collapse = True
            logger.warning(
                f"Step {step}: the encoder's top layer has collapsed: {symptoms}. "
                "A model from scratch on its unigram plateau can pass through this and recover; if it lasts, the "
                "measured small-run settings are in docs/pretraining.md (Small runs from scratch)."
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

    def measures_for_log(self, state, logs: dict) -> dict:
        """The last probe's measures, for the next training log (`PretrainingTrainer.log` asks)."""
        if "loss" not in logs:
            return {}
        measures, self._measures = self._measures, {}
        return measures

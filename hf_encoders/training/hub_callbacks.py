"""The callbacks of a run that pushes to the Hub: complete uploads (code and card) and a branch per checkpoint."""

import shutil
from collections.abc import Callable
from pathlib import Path

from transformers import TrainerCallback, TrainerState
from transformers.dynamic_module_utils import custom_object_save
from transformers.trainer_utils import HubStrategy
from transformers.utils import logging

from .hub import push_branch, stage_checkpoint_model

logger = logging.get_logger(__name__)


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

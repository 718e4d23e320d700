"""Streamed corpora (`pretrain --streaming`): a position that checkpoints hold, and one part of the stream per rank.

Trainer 5.24 resumes a run by replaying the batches it already trained on (`skip_first_batches`): for a stream, that
reads, tokenizes, packs and masks every one of them again. Here the loader is torchdata's `StatefulDataLoader`
(accelerate's `use_stateful_dataloader`), whose state, the `datasets.IterableDataset`'s own `state_dict()` (per
dataloader worker), every checkpoint saves per rank beside its RNG state; a resumed run loads it and skips nothing.
The first new batch then costs one `map` batch of documents read and packed again, wherever the checkpoint is, and a
re-read of the current file up to the position, whose rows datasets skips without decoding them further.

Packing needs no state of its own: it runs inside `IterableDataset.map(batched=True)` (data/packing.py), keeping no
buffer across map batches (each drops its short tail), and datasets saves a batched map's position as the state before
the batch plus the number of blocks already yielded from it, so a resumed stream packs that batch again and continues
at the next block. Masks are a function of (seed, epoch, batch) (data/reproducible_masking.py).
"""

import json
import warnings
from contextlib import contextmanager
from pathlib import Path

import datasets
import torch
from accelerate.data_loader import prepare_data_loader
from datasets.distributed import split_dataset_by_node
from torch.utils.data import DataLoader
from transformers.utils import logging

from .resume import last_complete_checkpoint
from .trainer import PretrainingTrainer

logger = logging.get_logger(__name__)

STREAM_STATE_FILE = "stream_state_{rank}.json"


def stream_for_this_rank(documents: datasets.IterableDataset, training_args) -> datasets.IterableDataset:
    """The part of a streamed corpus this rank trains on: whole shards (files) when their count divides by the number of
    ranks, else every world_size-th document (each rank still reads every file, but tokenizes only its documents)."""
    if training_args.world_size == 1:
        return documents
    return split_dataset_by_node(documents, rank=training_args.process_index, world_size=training_args.world_size)


def stream_state_file(checkpoint: str | Path, rank: int) -> Path:
    return Path(checkpoint) / STREAM_STATE_FILE.format(rank=rank)


@contextmanager
def stateful_loaders_made_quietly():
    """torchdata's `StatefulDataLoader()` (0.11, its latest release) calls `torch.set_vital`, which torch deprecated
    (a no-op since TorchVitals left it; meta-pytorch/data#1536), so every loader made warned "'set_vital' is
    deprecated, please do not call": nothing a user can act on, and no call of ours to change. Only that warning,
    from torchdata, is silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="'set_vital' is deprecated", module=r"torchdata\.")
        yield


class StreamingPretrainingTrainer(PretrainingTrainer):
    """`PretrainingTrainer` on a `datasets.IterableDataset` that checkpoints the stream's position and resumes from it.

    A checkpoint without the state (written with `--save_only_model`, or by hf-encoders 0.2) is resumed Trainer's
    way, by replaying the stream, with a warning.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not isinstance(self.train_dataset, datasets.IterableDataset):
            raise TypeError(f"{type(self).__name__} trains on a datasets.IterableDataset (a stream).")
        self.stream_loader = None  # the loader whose state checkpoints hold, once Trainer has asked for it
        self.stream_state = None  # the state to resume from

    def train(self, resume_from_checkpoint=None, **kwargs):
        checkpoint = resume_from_checkpoint
        if checkpoint is True:
            checkpoint = last_complete_checkpoint(self.args.output_dir)
        self.stream_state = None
        if checkpoint and not self.args.ignore_data_skip:  # --ignore_data_skip: start the stream from its beginning
            state_file = stream_state_file(checkpoint, self.args.process_index)
            if state_file.is_file():
                self.stream_state = json.loads(state_file.read_text())
            else:
                logger.warning(
                    f"{checkpoint} holds no stream position ({state_file.name}): the stream is read again from its "
                    "start up to the checkpoint's step, which takes as long as reading it did."
                )
        if self.stream_state is not None:
            self.args.ignore_data_skip = True  # Trainer's skipping is the replay, which the restored position replaces
        return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)

    def get_train_dataloader(self) -> DataLoader:
        # Each rank already holds its own part of the stream (`stream_for_this_rank`), so accelerate must neither split
        # it again (num_processes=1) nor read it all on rank 0 and send each rank its batches (dispatch_batches).
        loader = DataLoader(
            self.train_dataset,
            batch_size=self._train_batch_size,
            collate_fn=self._get_collator_with_removed_columns(self.data_collator, description="Training"),
            num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory,
            persistent_workers=self.args.dataloader_persistent_workers,
            multiprocessing_context=self.args.dataloader_multiprocessing_context,
            prefetch_factor=self.args.dataloader_prefetch_factor,
            # Starting an epoch draws the workers' base seed from this generator, else from the global RNG, which a
            # resumed run restores before its first epoch starts, not after, as Trainer's replay does: the draw would
            # shift every later random number (dropout) from the uninterrupted run's.
            generator=torch.Generator().manual_seed(self.args.seed),
        )
        with stateful_loaders_made_quietly():
            self.stream_loader = prepare_data_loader(
                loader,
                self.args.device,
                num_processes=1,
                process_index=0,
                dispatch_batches=False,
                non_blocking=self.accelerator.non_blocking,
                use_stateful_dataloader=True,
            )
        return self.stream_loader

    def _init_training_state(self, *args, **kwargs) -> tuple[int, int]:
        epochs_trained, steps_trained_in_current_epoch = super()._init_training_state(*args, **kwargs)
        if self.stream_state is not None:
            # Trainer cannot know a stream's length, so it counts max_steps steps to an epoch and would resume in epoch
            # 0 (or 1, from a run's last step); the epoch is the stream's pass (see _run_epoch), which datasets restores
            # a position into only when it is the saved one.
            epochs_trained = self.stream_state["epoch"]
            if self.stream_state["loader"].get("_iterator_finished"):  # saved after the pass's last batch
                epochs_trained += 1
                self.stream_state = None
            self.state.epoch = epochs_trained  # what the masks' epoch reads (MaskingEpochCallback)
        return epochs_trained, steps_trained_in_current_epoch

    def _run_epoch(self, *, epoch: int, **kwargs) -> None:
        super()._run_epoch(epoch=epoch, **kwargs)
        if not self.control.should_training_stop:
            # The stream ran out, short of the max_steps steps Trainer counts to an epoch, which leaves state.epoch short
            # of the next integer: state.epoch counts the passes over the stream, as the masks' epoch reads it
            # (MaskingEpochCallback), so that each pass is masked afresh.
            self.state.epoch = epoch + 1

    def _save_rng_state(self, output_dir: str) -> None:
        """Every rank saves its stream's position with its RNG state: both are written before trainer_state.json, which
        marks a checkpoint complete (training/resume.py)."""
        super()._save_rng_state(output_dir)
        # The loader's iteration is the epoch Trainer set (set_epoch) for the pass under way.
        state = {"epoch": self.stream_loader.iteration, "loader": self.stream_loader.state_dict()}
        stream_state_file(output_dir, self.args.process_index).write_text(json.dumps(state))

    def _load_rng_state(self, checkpoint: str | None) -> None:
        """Trainer restores the RNG state just before it iterates the resumed epoch's loader: the stream's position too."""
        super()._load_rng_state(checkpoint)
        if self.stream_state is not None:
            self.stream_loader.load_state_dict(self.stream_state["loader"])
            self.stream_state = None  # once: a later epoch starts its pass from the beginning

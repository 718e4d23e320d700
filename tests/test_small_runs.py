"""A tiny model built from scratch with the demo's small-run settings reads context: its masked-LM loss falls below
what a model that reads no context scores on its corpus (the unigram entropy, less what BERT's 80/10/10 masking lets
a model copy) by a margin, for MLM and for MAE-LM with its tiny size's decoder options."""

import math

import pytest

from hf_encoders.analysis import token_counts, unigram_entropy
from hf_encoders.data.embedded import embedded_documents
from hf_encoders.data.tokenizer import train_wordpiece_tokenizer
from hf_encoders.demo import PLATEAU_MARGIN, build_parser, demo_training_arguments
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.pretrain import pretrain

pytestmark = pytest.mark.usefixtures("one_thread")

# A corpus small enough to be seen many times in a few hundred steps of a few seconds.
DOCUMENTS = 5
STEPS = 800
# MAE-LM's run: short enough that, without its tiny size's decoder options, it ends less than PLATEAU_MARGIN below the
# unigram entropy (this corpus is small enough to be learned by heart in a longer run, by any decoder).
MAE_LM_STEPS = 300
# How far below the no-context loss the run must end (nats).
MARGIN = 0.25


def last_losses(log_history: list[dict]) -> float:
    """The mean of the last three logged training losses (one logged loss is a noisy read of the model)."""
    losses = [entry["loss"] for entry in log_history if "loss" in entry][-3:]
    return sum(losses) / len(losses)


def tiny_run(tmp_path, name: str, method: str = "mlm", steps: int = STEPS, **overrides) -> tuple[float, float, float]:
    """(unigram entropy, first logged loss, last logged losses) of a tiny run from scratch on the demo's settings."""
    settings = build_parser().parse_args(["--output_dir", str(tmp_path)])
    texts = embedded_documents()[:DOCUMENTS]
    tokenizer = train_wordpiece_tokenizer(texts, vocab_size=settings.vocab_size)
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    plateau = unigram_entropy(token_counts(tokenizer, texts))
    args = PretrainArguments(
        method=method,
        tokenizer_name=str(tmp_path / "tokenizer"),
        model_size="tiny",
        block_size=32,
        max_documents=DOCUMENTS,
    )
    training_args = demo_training_arguments(
        tmp_path / name,
        settings,
        max_steps=steps,
        per_device_train_batch_size=16,
        use_cpu=True,
        disable_tqdm=True,
        **overrides,
    )
    history = pretrain(args, training_args).trainer.state.log_history
    first = next(entry["loss"] for entry in history if "loss" in entry)
    return plateau, first, last_losses(history)


def no_context_loss(plateau: float) -> float:
    """BERT's masking shows a tenth of the targets as themselves and a tenth as a random token: a model that reads no
    context but copies the token it sees (right half the time) scores H on the [MASK]s, ln 2 on the kept tokens and
    H + ln 2 on the replaced ones."""
    return 0.8 * plateau + 0.1 * math.log(2) + 0.1 * (plateau + math.log(2))


def test_the_small_run_settings_take_a_tiny_model_from_scratch_off_the_unigram_plateau(tmp_path):
    plateau, first, last = tiny_run(tmp_path, "small_run")
    assert first > plateau  # an untrained model is worse than the unigram model
    assert last < plateau - PLATEAU_MARGIN, (last, plateau)  # the demo's table marks the row off its plateau
    assert last < no_context_loss(plateau) - MARGIN, (last, no_context_loss(plateau))


def test_the_small_run_settings_take_a_tiny_mae_lm_from_scratch_off_the_unigram_plateau(tmp_path):
    """MAE-LM shows every target as [MASK] and hides it from the encoder: nothing can be copied, so the unigram
    entropy is the loss of a model that reads no context. Its tiny size's decoder options take it below."""
    plateau, first, last = tiny_run(tmp_path, "mae_lm", method="mae_lm", steps=MAE_LM_STEPS)
    assert first > plateau
    assert last < plateau - PLATEAU_MARGIN, (last, plateau)

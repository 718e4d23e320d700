"""Masked-LM logits outside training are the stock layout, (batch, length, vocab), with or without labels, in every
method; the compact training layout stays in training, and in eval on request (`compact_eval_logits`), a switch of
the model object that no checkpoint carries. And MAE-LM says once when the stock 80/10/10 masking feeds it targets
it is meant never to see."""

import json
import logging

import pytest
import torch
from torch import nn
from transformers import DataCollatorForLanguageModeling, TrainingArguments

from hf_encoders import (
    BiphasicEncoderForMaskedLM,
    BiphasicEncoderForPreTraining,
    DataCollatorForMaeLm,
    MaeLmForMaskedLM,
    TaclForPreTraining,
)
from hf_encoders.training.trainer import PretrainingTrainer
from tests.tiny_models import (
    MASK_TOKEN_ID,
    VOCAB_SIZE,
    sample_batch,
    tiny_biphasic_config,
    tiny_mae_lm_config,
    tiny_tacl_config,
    tiny_tokenizer,
)

MASKED_LMS = {
    "mae_lm": lambda: MaeLmForMaskedLM(tiny_mae_lm_config()),
    "biphasic": lambda: BiphasicEncoderForMaskedLM(tiny_biphasic_config()),
    "biphasic-pretraining": lambda: BiphasicEncoderForPreTraining(tiny_biphasic_config()),
    "tacl": lambda: TaclForPreTraining(tiny_tacl_config(use_nsp=False)),
}


def labelled_batch():
    """sample_batch with targets at its [MASK]s."""
    batch = sample_batch()
    labels = torch.full_like(batch["input_ids"], -100)
    masked = batch["input_ids"] == MASK_TOKEN_ID
    labels[masked] = torch.randint(5, VOCAB_SIZE, (int(masked.sum()),), generator=torch.Generator().manual_seed(1))
    return batch, labels


@pytest.mark.parametrize("name", list(MASKED_LMS))
def test_eval_logits_have_the_stock_layout_with_labels_and_the_compact_one_on_request(name):
    torch.manual_seed(0)
    model = MASKED_LMS[name]().eval()
    batch, labels = labelled_batch()
    labelled = labels != -100
    with torch.no_grad():
        unlabelled = model(**batch).logits
        out = model(**batch, labels=labels)
        model.compact_eval_logits = True
        compact = model(**batch, labels=labels)
    assert out.logits.shape == unlabelled.shape == (*labels.shape, VOCAB_SIZE)
    torch.testing.assert_close(out.logits, unlabelled)
    expected_loss = nn.functional.cross_entropy(unlabelled[labelled], labels[labelled])
    mlm_loss = out.mlm_loss if name == "tacl" else out.loss  # TaCL's total adds its contrastive term
    torch.testing.assert_close(mlm_loss, expected_loss)
    # run_mlm.py's compute_metrics: the argmax, flattened, indexed with the flattened labels' mask.
    predictions = out.logits.argmax(-1).reshape(-1)[labels.reshape(-1) != -100]
    assert torch.equal(predictions, unlabelled[labelled].argmax(-1))
    # The switch: the training layout, (labelled positions, vocab) in row-major order, and the same loss.
    assert compact.logits.shape == (int(labelled.sum()), VOCAB_SIZE)
    torch.testing.assert_close(compact.logits, unlabelled[labelled])
    torch.testing.assert_close(compact.loss, out.loss)


@pytest.mark.parametrize("name", list(MASKED_LMS))
def test_training_keeps_the_compact_layout(name):
    torch.manual_seed(0)
    model = MASKED_LMS[name]().train()
    batch, labels = labelled_batch()
    out = model(**batch, labels=labels)
    # Three labelled rows, fewer than the 32 hidden units: the unfused path, with compact logits (test_lean_loss.py
    # covers the fused one, which returns none).
    assert out.logits.shape == (int((labels != -100).sum()), VOCAB_SIZE)


def test_the_switch_is_the_models_never_the_checkpoints(tmp_path):
    model = MaeLmForMaskedLM(tiny_mae_lm_config())
    model.compact_eval_logits = True
    model.save_pretrained(tmp_path)
    assert "compact_eval_logits" not in json.loads((tmp_path / "config.json").read_text())
    assert MaeLmForMaskedLM.from_pretrained(tmp_path).compact_eval_logits is False


def unmasked_warnings(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if "reach MaeLmForMaskedLM unmasked" in record.message]


def test_mae_lm_warns_once_per_model_when_stock_masking_leaves_targets_in_the_encoder(caplog):
    tokenizer = tiny_tokenizer()
    texts = [{"input_ids": list(range(5, 45))}] * 4
    stock = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.3, seed=0)  # run_mlm.py's, 80/10/10
    batch = stock(texts)
    labelled = batch["labels"] != -100
    unmasked = int((labelled & (batch["input_ids"] != tokenizer.mask_token_id)).sum())
    assert unmasked > 0, "the seed must leave some targets unmasked"
    model = MaeLmForMaskedLM(tiny_mae_lm_config()).eval()
    with caplog.at_level(logging.WARNING), torch.no_grad():
        model(**batch)
        model(**stock(texts))
        (message,) = unmasked_warnings(caplog)
        share = f"{unmasked} of the batch's {int(labelled.sum())} masked-LM targets ({unmasked / labelled.sum():.0%})"
        assert message.startswith(share), message
        assert "DataCollatorForMaeLm" in message and "mask_replace_prob=1.0, random_replace_prob=0.0" in message
        MaeLmForMaskedLM(tiny_mae_lm_config()).eval()(**batch)  # another model says it again
        assert len(unmasked_warnings(caplog)) == 2
        caplog.clear()
        # All [MASK]: the package's collator, or the stock one told so.
        fresh = MaeLmForMaskedLM(tiny_mae_lm_config()).eval()
        fresh(**DataCollatorForMaeLm(tokenizer, seed=0)(texts))
        fresh(
            **DataCollatorForLanguageModeling(
                tokenizer, mlm_probability=0.3, mask_replace_prob=1.0, random_replace_prob=0.0, seed=0
            )(texts)
        )
    assert unmasked_warnings(caplog) == []


def test_mae_lm_collator_told_to_leave_targets_unmasked_says_so_when_built(caplog):
    """Its batches carry index tensors, with which the model counts nothing: the collator warns instead."""
    with caplog.at_level(logging.WARNING):
        DataCollatorForMaeLm(tiny_tokenizer(), seed=0)
        assert caplog.records == []
        DataCollatorForMaeLm(tiny_tokenizer(), mask_replace_prob=0.8, random_replace_prob=0.1)
    (record,) = caplog.records
    assert "mask_replace_prob=0.8) leaves a share of the targets unmasked or randomised" in record.getMessage()


def test_pretraining_evaluations_which_read_losses_only_keep_the_compact_layout(tmp_path):
    arguments = TrainingArguments(str(tmp_path), report_to="none", use_cpu=True)
    losses_only, with_metrics = (MaeLmForMaskedLM(tiny_mae_lm_config()) for _ in range(2))
    PretrainingTrainer(model=losses_only, args=arguments)
    PretrainingTrainer(model=with_metrics, args=arguments, compute_metrics=lambda prediction: {})
    assert losses_only.compact_eval_logits and not with_metrics.compact_eval_logits

"""The collators' fixed-size index tensors (data/index_tensors.py): sizes that follow (batch, length, rate) only, the
positions they name, a training forward that reads nothing from the device with them, and the same loss and
gradients as the path that counts on the device, which batches of a stock collator take."""

import math

import pytest
import torch
from datasets import Dataset
from transformers import DataCollatorForLanguageModeling
from transformers.utils import find_labels

from hf_encoders import (
    BiphasicEncoderForMaskedLM,
    BiphasicEncoderForPreTraining,
    DataCollatorForBiphasic,
    DataCollatorForMaeLm,
    DataCollatorForTacl,
    MaeLmForMaskedLM,
    TaclForPreTraining,
)
from hf_encoders.data import embedded_documents, pack_bert_style, tokenize_documents
from hf_encoders.data.index_tensors import KEPT, LABELLED, kept_index, kept_slots, labelled_index
from tests.helpers import DeviceReads
from tests.tiny_models import BERT_SHAPE, corpus_tokenizer, tiny_biphasic_config, tiny_mae_lm_config, tiny_tacl_config

LENGTH = 128
INDEX_NAMES = {*LABELLED, *KEPT, *(f"mlm_{name}" for name in LABELLED)}


@pytest.fixture(scope="module")
def tokenizer():
    return corpus_tokenizer()


def blocks_of(tokenizer, pack_documents: bool) -> Dataset:
    documents = Dataset.from_dict({"text": embedded_documents()[:40]})
    ids = dict(cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id)
    return pack_bert_style(tokenize_documents(documents, tokenizer), LENGTH, **ids, pack_documents=pack_documents)


@pytest.fixture(scope="module")
def blocks(tokenizer):
    return blocks_of(tokenizer, pack_documents=False)


@pytest.fixture(scope="module")
def packed_blocks(tokenizer):
    """Several documents per block, with the position_ids that say where each starts."""
    return blocks_of(tokenizer, pack_documents=True)


def collator_of(name: str, tokenizer):
    if name.startswith("mae_lm"):
        return DataCollatorForMaeLm(tokenizer, seed=0, mask_in_encoder_fraction=float(name.split("=")[1]))
    if name == "tacl":
        return DataCollatorForTacl(tokenizer, seed=0)
    return DataCollatorForBiphasic(tokenizer, seed=0)


def model_of(name: str, tokenizer):
    torch.manual_seed(0)
    vocabulary = dict(vocab_size=len(tokenizer), max_position_embeddings=LENGTH)
    if name.startswith("mae_lm"):
        # Without dropout: its draws follow the encoder's input shape, which the index tensors fix and the other path
        # takes from the longest kept row.
        dropout_free = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        return MaeLmForMaskedLM(tiny_mae_lm_config(**vocabulary, **dropout_free)).train()
    if name == "tacl":
        from transformers import BertConfig

        return TaclForPreTraining(tiny_tacl_config(BertConfig(**{**BERT_SHAPE, **vocabulary}), use_nsp=False)).train()
    model = BiphasicEncoderForPreTraining(tiny_biphasic_config(**vocabulary, mask_token_id=tokenizer.mask_token_id))
    model.objective = name.split("_")[1]
    return model.train()


COLLATED = ["mae_lm δ=0", "mae_lm δ=0.5", "mae_lm δ=1", "tacl", "biphasic"]
FORWARDS = ["mae_lm δ=0", "mae_lm δ=0.5", "mae_lm δ=1", "tacl", "biphasic_mlm", "biphasic_clm"]


def batches(collator, blocks, count: int = 5, batch_size: int = 8, keep=("input_ids",)):
    for start in range(0, count * batch_size, batch_size):
        yield collator([{key: blocks[i][key] for key in keep} for i in range(start, start + batch_size)])


def chosen_in_order(positions: torch.Tensor, mask: torch.Tensor, chosen: torch.Tensor) -> None:
    """The slots marked valid list exactly the chosen positions of each row, in order."""
    for row in range(len(chosen)):
        assert positions[row][mask[row]].tolist() == torch.arange(chosen.shape[1])[chosen[row]].tolist()


@pytest.mark.parametrize("name", COLLATED)
def test_index_tensors_have_sizes_of_batch_length_and_rate_only_and_name_the_masked_positions(name, tokenizer, blocks):
    collator = collator_of(name, tokenizer)
    shapes = set()
    for batch in batches(collator, blocks):
        shapes.add(tuple((key, tuple(value.shape)) for key, value in batch.items() if key in INDEX_NAMES))
        prefix = "mlm_" if name == "biphasic" else ""
        labels = batch[prefix + "labels"]
        chosen_in_order(batch[prefix + "target_positions"], batch[prefix + "target_mask"], labels != -100)
        if name.startswith("mae_lm"):
            removed = batch["input_ids"] == tokenizer.mask_token_id
            if "masks_in_encoder" in batch:
                removed &= ~batch["masks_in_encoder"]
            keep = ~removed
            chosen_in_order(batch["kept_positions"], batch["kept_mask"], keep)
            # Restoring puts every kept position's slot back at that position.
            restored = batch["kept_positions"].gather(1, batch["restore_index"])
            assert torch.equal(restored[keep], torch.arange(LENGTH).expand(len(keep), -1)[keep])
        if name == "biphasic":  # next-token labels: every position is a slot
            chosen_in_order(batch["target_positions"], batch["target_mask"], batch["labels"] != -100)
    assert len(shapes) == 1, shapes
    sizes = dict(shapes.pop())
    prefix = "mlm_" if name == "biphasic" else ""
    assert sizes[prefix + "target_positions"] == (8, math.ceil(collator.mlm_probability * LENGTH))
    if name.startswith("mae_lm"):
        delta = collator.mask_in_encoder_fraction
        assert sizes["kept_positions"] == (8, kept_slots(LENGTH, 0.15, delta))
        if delta == 0:  # the encoder reads fewer positions than the row holds
            assert kept_slots(LENGTH, 0.15, delta) == 112


def test_coins_per_token_get_every_position_as_slots(tokenizer, blocks):
    """No count bounds a coin per token's masks: fixed sizes still, the whole row."""
    collator = DataCollatorForMaeLm(tokenizer, seed=0, mask_count="per_token")
    for batch in batches(collator, blocks, count=3):
        assert batch["target_positions"].shape == batch["kept_positions"].shape == (8, LENGTH)


def test_a_row_holding_more_than_planned_gets_more_slots():
    labels = torch.full((2, 32), -100)
    labels[1, :20] = 7
    index = labelled_index(labels, 5)
    assert index["target_positions"].shape == (2, 24)  # 20, rounded up to 8
    assert index["target_mask"].sum().tolist() == 20


def strip(batch: dict) -> dict:
    return {key: value for key, value in batch.items() if key not in INDEX_NAMES}


def step(model, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    torch.manual_seed(1)  # the same dropout both ways
    loss = model(**batch).loss
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def assert_same_step(model, with_index: dict, without: dict) -> None:
    loss, gradients = step(model, with_index)
    stock_loss, stock_gradients = step(model, without)
    torch.testing.assert_close(loss, stock_loss, rtol=1e-5, atol=1e-6)
    assert gradients.keys() == stock_gradients.keys()
    for name, gradient in stock_gradients.items():
        torch.testing.assert_close(gradients[name], gradient, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("name", FORWARDS)
def test_the_step_is_the_same_with_the_index_tensors_and_without(name, tokenizer, blocks):
    model = model_of(name, tokenizer)
    batch = next(batches(collator_of(name.split("_m")[0].split("_c")[0], tokenizer), blocks, count=1))
    assert INDEX_NAMES & set(batch)
    assert_same_step(model, batch, strip(batch))


def test_a_stock_collators_batch_works_and_scores_as_with_index_tensors(tokenizer, blocks):
    """DataCollatorForLanguageModeling's batch (no index tensors) takes the path that counts on the device; the same
    masks with index tensors built for them give the same step."""
    stock = DataCollatorForLanguageModeling(tokenizer, mask_replace_prob=1.0, random_replace_prob=0.0, seed=0)
    batch = stock([{"input_ids": blocks[i]["input_ids"]} for i in range(8)])
    keep = batch["attention_mask"].bool() & (batch["input_ids"] != tokenizer.mask_token_id)
    indexed = {**batch, **labelled_index(batch["labels"], 20), **kept_index(keep, 112)}
    assert_same_step(model_of("mae_lm δ=0", tokenizer), indexed, batch)


@pytest.mark.parametrize("name", FORWARDS)
def test_a_training_forward_with_index_tensors_reads_nothing_from_the_device(name, tokenizer, blocks, packed_blocks):
    """Packed blocks carry position_ids, which the collator checks on the host. TaCL's encoders are transformers'
    own: their mask code reads whether a padding mask masks anything, so its rows go without one (full blocks)."""
    collator = collator_of(name.split("_m")[0].split("_c")[0], tokenizer)
    keep = ("input_ids",) if name == "tacl" else ("input_ids", "position_ids")
    batch = next(batches(collator, blocks if name == "tacl" else packed_blocks, count=1, keep=keep))
    if name == "tacl":
        del batch["attention_mask"]
    else:
        assert (batch["position_ids"][:, 1:] == 0).any(), "the blocks hold several documents"
    model = model_of(name, tokenizer)
    model.padding_checked = True  # MAE-LM's one look at the first batch's padding (warn_if_padding_differs)
    model(**batch)  # anything done once, on the first call
    with DeviceReads() as counted:
        model(**batch).loss.backward()
    assert counted.reads == []
    with DeviceReads() as counted:
        model(**strip(batch)).loss.backward()
    assert counted.reads, "the counter sees the path that reads the counts"


@pytest.mark.parametrize(
    "model_class", [MaeLmForMaskedLM, TaclForPreTraining, BiphasicEncoderForPreTraining, BiphasicEncoderForMaskedLM]
)
def test_trainer_takes_no_index_tensor_for_a_label(model_class):
    """Trainer calls every forward argument with "label" in its name a label and computes no metric for a batch that
    lacks one: index tensors named so would leave the stock scripts' batches (a stock collator writes none) without
    their accuracy."""
    assert [name for name in find_labels(model_class) if "position" in name or "mask" in name] == []

"""Packed documents: rows whose position_ids restart at 0 hold several documents, and each document gets exactly the
states, logits and losses it gets alone (transformers' packed-sequence convention, as DataCollatorWithFlattening
and `hf-encoders pretrain --pack_documents` write it)."""

import pytest
import torch
from datasets import Dataset
from transformers import DataCollatorWithFlattening

from hf_encoders import (
    BiphasicEncoder,
    BiphasicEncoderForMaskedLM,
    BiphasicEncoderForPreTraining,
    BiphasicEncoderForQuestionAnswering,
    BiphasicEncoderForTokenClassification,
    DataCollatorForBiphasic,
    DataCollatorForMaeLm,
    MaeLmForMaskedLM,
    MaeLmForQuestionAnswering,
    MaeLmForTokenClassification,
    MaeLmModel,
)
from hf_encoders.data import pack_bert_style, pack_llama_style
from hf_encoders.training.pretrain import build_trainer
from tests.helpers import first_output, tiny_run_arguments, tiny_training_arguments
from tests.tiny_models import MASK_TOKEN_ID, VOCAB_SIZE, tiny_biphasic_config, tiny_mae_lm_config, tiny_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

LENGTHS = (5, 9, 4, 6)  # four documents: transformers' own packed causal mask failed from the third on

ENCODERS = [
    (MaeLmModel, tiny_mae_lm_config, {}),
    (MaeLmForMaskedLM, tiny_mae_lm_config, {}),
    (MaeLmForTokenClassification, tiny_mae_lm_config, {}),
    (MaeLmForQuestionAnswering, tiny_mae_lm_config, {}),
    (BiphasicEncoder, tiny_biphasic_config, {}),
    (BiphasicEncoder, tiny_biphasic_config, {"is_causal": True}),
    (BiphasicEncoderForMaskedLM, tiny_biphasic_config, {}),
    (BiphasicEncoderForPreTraining, tiny_biphasic_config, {"objective": "clm"}),
    (BiphasicEncoderForPreTraining, tiny_biphasic_config, {"objective": "mlm"}),
    (BiphasicEncoderForTokenClassification, tiny_biphasic_config, {}),
    (BiphasicEncoderForQuestionAnswering, tiny_biphasic_config, {}),
]


def documents(seed: int = 0) -> list[torch.Tensor]:
    """Token ids with [MASK]s, one of them on a document's first token (which MAE-LM's compaction then drops)."""
    generator = torch.Generator().manual_seed(seed)
    docs = [torch.randint(5, VOCAB_SIZE, (length,), generator=generator) for length in LENGTHS]
    docs[1][0] = docs[1][4] = docs[2][1] = MASK_TOKEN_ID
    return docs


def packed(docs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    return {
        "input_ids": torch.cat(docs)[None],
        "position_ids": torch.cat([torch.arange(len(doc)) for doc in docs])[None],
    }


def per_token_output(output) -> torch.Tensor:
    return (
        torch.stack([output.start_logits, output.end_logits], -1)
        if hasattr(output, "start_logits")
        else (first_output(output))
    )


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize(("model_class", "config", "options"), ENCODERS)
def test_a_packed_document_gets_the_outputs_it_gets_alone(model_class, config, options, attention):
    assert_packed_equals_alone(model_class, config, options, attention)


@pytest.mark.parametrize(("model_class", "config", "options"), [e for e in ENCODERS if e[1] is tiny_mae_lm_config])
def test_a_packed_document_gets_the_outputs_it_gets_alone_under_mae_lms_flex_attention(model_class, config, options):
    """MAE-LM's own flex path (a BlockMask of documents, the bias as a score_mod), eagerly on CPU."""
    assert_packed_equals_alone(model_class, config, options, "flex_attention")


@pytest.mark.slow
@pytest.mark.parametrize("options", [{"objective": "mlm"}, {"objective": "clm"}])
def test_a_packed_document_gets_the_outputs_it_gets_alone_under_biphasic_flex_attention(options):
    """Llama's flex integration with the documents' BlockMask, in both objectives (compiled by inductor on CPU)."""
    assert_packed_equals_alone(BiphasicEncoderForPreTraining, tiny_biphasic_config, options, "flex_attention")


def assert_packed_equals_alone(model_class, config, options, attention):
    torch.manual_seed(0)
    model = model_class(config(attn_implementation=attention)).eval()
    docs = documents()
    with torch.no_grad():  # flex_attention has no backward on CPU
        together = per_token_output(model(**packed(docs), **options))[0]
        alone = torch.cat([per_token_output(model(input_ids=doc[None], **options))[0] for doc in docs])
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attention", ["sdpa", "eager", "flex_attention"])
def test_packed_rows_with_padding_and_several_rows(attention):
    """Two packed rows, the second right-padded: each document still equals itself alone."""
    model = MaeLmModel(tiny_mae_lm_config(attn_implementation=attention)).eval()
    docs = documents(1)
    rows = [packed(docs[:2]), packed(docs[2:])]
    width = max(row["input_ids"].shape[1] for row in rows)

    def padded(key: str, fill=None) -> torch.Tensor:
        return torch.cat(
            [
                torch.nn.functional.pad(
                    row[key] if fill is None else torch.ones_like(row[key]), (0, width - row[key].shape[1])
                )
                for row in rows
            ]
        )

    batch = {
        "input_ids": padded("input_ids"),
        "position_ids": padded("position_ids"),
        "attention_mask": padded("input_ids", fill=1),
    }
    with torch.no_grad():  # flex_attention has no backward on CPU
        states = model(**batch).last_hidden_state
        alone = torch.cat([model(input_ids=doc[None]).last_hidden_state[0] for doc in docs])
    real = states[batch["attention_mask"].bool()]
    torch.testing.assert_close(real, alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("model_class", "config"),
    [(MaeLmForMaskedLM, tiny_mae_lm_config), (BiphasicEncoderForMaskedLM, tiny_biphasic_config)],
)
def test_the_masked_lm_loss_of_a_packed_row_is_the_loss_over_its_documents(model_class, config):
    torch.manual_seed(0)
    model = model_class(config()).eval()
    docs = documents(2)
    labels = [torch.where(doc == MASK_TOKEN_ID, torch.arange(len(doc)) + 5, -100) for doc in docs]
    together = model(**packed(docs), labels=torch.cat(labels)[None]).loss
    sums = [
        model(input_ids=doc[None], labels=label[None]).loss * (label != -100).sum() for doc, label in zip(docs, labels)
    ]
    count = sum(int((label != -100).sum()) for label in labels)
    torch.testing.assert_close(together, torch.stack(sums).sum() / count)


def test_clm_never_predicts_a_documents_first_token_from_the_previous_one():
    """Even with labels that cross documents (a stock collator's), the packed CLM loss is the documents' own."""
    torch.manual_seed(0)
    model = BiphasicEncoderForPreTraining(tiny_biphasic_config()).eval()
    docs = documents(3)
    crossing = torch.cat([torch.cat(docs)[1:], torch.tensor([-100])])[None]  # labels[i] = input_ids[i + 1]
    together = model(**packed(docs), labels=crossing, objective="clm").loss
    per_document = [torch.cat([doc[1:], torch.tensor([-100])]) for doc in docs]
    sums = [
        model(input_ids=doc[None], labels=label[None], objective="clm").loss * (len(doc) - 1)
        for doc, label in zip(docs, per_document)
    ]
    torch.testing.assert_close(together, torch.stack(sums).sum() / sum(len(doc) - 1 for doc in docs))


@pytest.mark.parametrize("model_class", [MaeLmModel, BiphasicEncoder])
def test_what_data_collator_with_flattening_emits_is_taken_as_packed_documents(model_class):
    config = tiny_mae_lm_config() if model_class is MaeLmModel else tiny_biphasic_config()
    model = model_class(config).eval()
    docs = documents(4)
    collate = DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)
    batch = collate([{"input_ids": doc.tolist()} for doc in docs])
    batch.pop("labels")
    together = model(**batch).last_hidden_state[0]
    alone = torch.cat([model(input_ids=doc[None]).last_hidden_state[0] for doc in docs])
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model_class", [MaeLmModel, MaeLmForMaskedLM, BiphasicEncoder])
@pytest.mark.parametrize(
    ("positions", "wrong"),
    [([[1, 2, 3, 0, 1]], "position_ids\\[0, 0\\] = 1"), ([[0, 1, 2, 1, 2]], "position_ids\\[0, 3\\] = 1")],
)
def test_positions_that_neither_count_up_nor_restart_at_zero_are_refused(model_class, positions, wrong):
    config = tiny_biphasic_config() if model_class is BiphasicEncoder else tiny_mae_lm_config()
    with pytest.raises(ValueError, match=f"{wrong}: a packed row's positions must start at 0 and rise"):
        model_class(config)(input_ids=torch.full((1, 5), 7), position_ids=torch.tensor(positions))


def test_left_padded_positions_are_not_mistaken_for_packing():
    """transformers' generate-style positions for left padding: pads hold 1, real tokens count from 0."""
    model = BiphasicEncoder(tiny_biphasic_config()).eval()
    ids = torch.tensor([[0, 0, 7, 8, 9]])
    mask = torch.tensor([[0, 0, 1, 1, 1]])
    states = model(input_ids=ids, attention_mask=mask, position_ids=torch.tensor([[1, 1, 0, 1, 2]])).last_hidden_state
    torch.testing.assert_close(states[0, 2:], model(input_ids=ids[:, 2:]).last_hidden_state[0], rtol=1e-5, atol=1e-5)


HAND_DOCUMENTS = Dataset.from_dict({"input_ids": [[10, 11, 12], [13, 14, 15, 16, 17, 18, 19], [20, 21]]})


def test_pack_documents_bert_style_wraps_each_document_and_restarts_positions_across_blocks():
    blocks = pack_bert_style(HAND_DOCUMENTS, 6, cls_id=2, sep_id=3, separator_id=3, pack_documents=True)
    assert blocks["input_ids"] == [[2, 10, 11, 12, 3, 2], [13, 14, 15, 16, 17, 18], [19, 3, 2, 20, 21, 3]]
    assert blocks["position_ids"] == [[0, 1, 2, 3, 4, 0], [0, 1, 2, 3, 4, 5], [0, 1, 0, 1, 2, 3]]
    assert blocks["special_tokens_mask"][2] == [0, 1, 1, 0, 0, 1]


def test_pack_documents_llama_style():
    blocks = pack_llama_style(HAND_DOCUMENTS, 5, eos_id=6, bos_id=5, pack_documents=True)
    assert blocks["input_ids"] == [[5, 10, 11, 12, 6], [5, 13, 14, 15, 16], [17, 18, 19, 6, 5]]
    assert blocks["position_ids"] == [[0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 0]]


def test_pack_documents_needs_room_for_a_documents_text():
    with pytest.raises(ValueError, match="--pack_documents with block_size=2: each document takes 2 special tokens"):
        pack_bert_style(HAND_DOCUMENTS, 2, cls_id=2, sep_id=3, pack_documents=True)


def test_the_collators_keep_positions_and_masks_stay_inside_documents():
    blocks = pack_llama_style(HAND_DOCUMENTS, 5, eos_id=2, bos_id=1, pack_documents=True)
    collate = DataCollatorForBiphasic(tiny_tokenizer("llama"), mlm_probability=0.5, seed=0)
    batch = collate([dict(block) for block in blocks])
    assert batch["position_ids"].tolist() == blocks["position_ids"]
    ends = batch["position_ids"][:, 1:] == 0
    assert (batch["labels"][:, :-1][ends] == -100).all() and ends.any()
    masked = DataCollatorForMaeLm(tiny_tokenizer(), seed=0)([dict(block) for block in blocks])
    assert masked["position_ids"].tolist() == blocks["position_ids"]


@pytest.mark.parametrize("method", ["mae_lm", "biphasic"])
def test_pretrain_pack_documents_trains_on_rows_with_restarting_positions(method, bert, tmp_path):
    trainer = build_trainer(tiny_run_arguments(method, bert, pack_documents=True), tiny_training_arguments(tmp_path))
    batch = next(iter(trainer.get_train_dataloader()))
    assert (batch["position_ids"][:, 0] == 0).all()
    trainer.train()
    assert all(torch.isfinite(torch.tensor(entry["loss"])) for entry in trainer.state.log_history if "loss" in entry)


@pytest.mark.parametrize(("method", "reason"), [("mlm", "BertForMaskedLM"), ("tacl", "sentence pairs")])
def test_pack_documents_is_refused_where_attention_would_cross_documents(method, reason, bert, tmp_path):
    with pytest.raises(ValueError, match=f"--pack_documents cannot be used with .*{reason}.*--method mae_lm"):
        build_trainer(tiny_run_arguments(method, bert, pack_documents=True), tiny_training_arguments(tmp_path))

"""TaclForPreTraining: Eq. 1 against an independent implementation, the frozen teacher, the students it takes,
the plain student checkpoint, exact Trainer resumption and the logged loss terms."""

import json
import textwrap

import pytest
import torch
from datasets import Dataset
from safetensors.torch import load_file, save_file
from transformers import (
    BertConfig,
    BertForPreTraining,
    BertModel,
    RobertaConfig,
    TrainingArguments,
    default_data_collator,
)

from hf_encoders import DataCollatorForTacl, TaclForPreTraining
from hf_encoders.data import documents_to_sentences, embedded_documents
from hf_encoders.methods.tacl.sentence_pairs import build_sentence_pairs
from hf_encoders.models.tacl import token_contrastive_loss
from hf_encoders.training.trainer import PretrainingTrainer
from tests.helpers import fresh_interpreter
from tests.tiny_models import (
    BERT_SHAPE,
    MASK_TOKEN_ID,
    VOCAB_SIZE,
    tiny_biphasic_config,
    tiny_mae_lm_config,
    tiny_modernbert_config,
    tiny_tacl_config,
)

STUDENT_CONFIGS = {
    "bert": lambda: BertConfig(**BERT_SHAPE),
    "roberta": lambda: RobertaConfig(
        **{**BERT_SHAPE, "max_position_embeddings": 80, "pad_token_id": 1}, type_vocab_size=1
    ),
    "modernbert": tiny_modernbert_config,
    "biphasic": tiny_biphasic_config,  # this package's own encoder
}


def masked_batch(pad_lengths=(0, 3, 5), length=12, seed=0):
    """Clean ids, and the collator's view of them: anchors replaced 80/10/10-style by [MASK], a random token, or
    left unchanged, with labels at every anchor; rows right-padded by `pad_lengths`."""
    generator = torch.Generator().manual_seed(seed)
    clean = torch.randint(5, VOCAB_SIZE, (len(pad_lengths), length), generator=generator)
    attention_mask = torch.ones_like(clean)
    for row, pad in enumerate(pad_lengths):
        if pad:
            clean[row, -pad:] = 0
            attention_mask[row, -pad:] = 0
    anchors = torch.zeros_like(clean, dtype=torch.bool)
    anchors[:, [1, 4, 6]] = True
    input_ids = clean.clone()
    input_ids[:, 1] = MASK_TOKEN_ID
    input_ids[:, 4] = (clean[:, 4] + 7 - 5) % (VOCAB_SIZE - 5) + 5  # a different real token
    # position 6 stays unchanged: still an anchor
    labels = torch.where(anchors, clean, -100)
    batch = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "labels": labels,
        "next_sentence_label": torch.arange(len(pad_lengths)) % 2,
    }
    return clean, batch


def eq1_by_hand(student, teacher, anchors, attention_mask, temperature, padding_in_denominator):
    """Eq. 1, anchor by anchor, with explicit cosine similarities, averaged over anchors."""
    losses = []
    for row in range(student.shape[0]):
        keys = (
            torch.ones_like(attention_mask[row], dtype=torch.bool)
            if padding_in_denominator
            else attention_mask[row].bool()
        )
        for i in anchors[row].nonzero().flatten().tolist():
            similarities = (
                torch.stack(
                    [
                        torch.nn.functional.cosine_similarity(student[row, i], teacher[row, j], dim=0)
                        for j in keys.nonzero().flatten()
                    ]
                )
                / temperature
            )
            target = int(keys[:i].sum())  # position i among the denominator's positions
            losses.append(torch.logsumexp(similarities, 0) - similarities[target])
    return torch.stack(losses).mean()


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    return TaclForPreTraining(tiny_tacl_config()).eval()


@pytest.mark.parametrize("pad_lengths", [(0, 3, 5), (0, 0, 0)], ids=["padded", "unpadded"])
def test_contrastive_term_is_eq1(tiny_model, pad_lengths):
    clean, batch = masked_batch(pad_lengths)
    anchors = batch["labels"] != -100
    with torch.no_grad():
        out = tiny_model(**batch)
        # The teacher read the clean text, although the student saw [MASK], a random token and an unchanged one.
        torch.testing.assert_close(
            out.teacher_last_hidden_state,
            tiny_model.teacher(clean, attention_mask=batch["attention_mask"]).last_hidden_state,
        )
        expected = eq1_by_hand(
            out.last_hidden_state, out.teacher_last_hidden_state, anchors, batch["attention_mask"], 0.01, False
        )
        torch.testing.assert_close(out.tacl_loss, expected, atol=1e-4, rtol=1e-4)

        tiny_model.config.exclude_padding_from_contrast = False  # the reference code's denominator
        try:
            reference = tiny_model(**batch).tacl_loss
        finally:
            tiny_model.config.exclude_padding_from_contrast = True
    with_padding = eq1_by_hand(
        out.last_hidden_state, out.teacher_last_hidden_state, anchors, batch["attention_mask"], 0.01, True
    )
    torch.testing.assert_close(reference, with_padding, atol=1e-4, rtol=1e-4)
    if any(pad_lengths):
        assert reference - out.tacl_loss > 1e-4, "padding in the denominator adds negatives, so raises the loss"
    else:
        torch.testing.assert_close(reference, out.tacl_loss)


def test_total_loss_and_head_only_at_anchors(tiny_model, monkeypatch):
    _, batch = masked_batch()
    with torch.no_grad():
        out = tiny_model(**batch)
        own = tiny_model.student(**batch)  # BertForPreTraining's own MLM + NSP loss, logits at every position
        monkeypatch.setattr(tiny_model, "compact_eval_logits", True)
        compact = tiny_model(**batch)
    anchors = batch["labels"] != -100
    torch.testing.assert_close(out.logits, own.prediction_logits)  # eval: the stock layout
    assert compact.logits.shape == (int(anchors.sum()), VOCAB_SIZE)
    torch.testing.assert_close(compact.logits, own.prediction_logits[anchors])
    torch.testing.assert_close(compact.loss, out.loss)
    torch.testing.assert_close(out.mlm_loss + out.nsp_loss, own.loss)
    torch.testing.assert_close(out.loss, out.tacl_loss + out.mlm_loss + out.nsp_loss)


def test_batch_without_anchors_gives_a_finite_loss():
    model = TaclForPreTraining(tiny_tacl_config()).train()
    _, batch = masked_batch()
    batch["labels"] = torch.full_like(batch["labels"], -100)
    out = model(**batch)
    assert torch.isfinite(out.loss) and out.tacl_loss == 0 and out.mlm_loss == 0
    out.loss.backward()


def test_contrast_runs_in_fp32_for_half_precision_states():
    generator = torch.Generator().manual_seed(0)
    student, teacher = (torch.randn(2, 10, 16, generator=generator).bfloat16() for _ in range(2))
    anchors = torch.rand(2, 10, generator=generator) < 0.3
    loss = token_contrastive_loss(student, teacher, anchors, temperature=0.01)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(
        loss, token_contrastive_loss(student.float(), teacher.float(), anchors, temperature=0.01)
    )


def test_teacher_is_deterministic_while_the_student_trains_with_dropout():
    torch.manual_seed(0)
    model = TaclForPreTraining(tiny_tacl_config()).train()
    assert model.student.training and not model.teacher.training
    _, batch = masked_batch()
    first, second = model(**batch), model(**batch)
    assert not torch.equal(first.last_hidden_state, second.last_hidden_state), "student dropout is on"
    assert torch.equal(first.teacher_last_hidden_state, second.teacher_last_hidden_state)
    assert first.teacher_last_hidden_state.grad_fn is None


@pytest.mark.parametrize("student_type", sorted(STUDENT_CONFIGS))
def test_students(student_type):
    torch.manual_seed(0)
    model = TaclForPreTraining(tiny_tacl_config(STUDENT_CONFIGS[student_type]()))
    assert model.config.use_nsp == (student_type == "bert")
    # The teacher starts as an exact copy of the student's encoder.
    student_encoder = model.student.base_model.state_dict()
    assert all(torch.equal(student_encoder[key], value) for key, value in model.teacher.state_dict().items())
    _, batch = masked_batch()
    if student_type != "bert":
        batch.pop("next_sentence_label")
    model.train()
    out = model(**batch)
    out.loss.backward()
    assert torch.isfinite(out.loss) and (out.nsp_loss is not None) == (student_type == "bert")
    assert model.student.base_model.get_input_embeddings().weight.grad is not None
    model.eval()
    with torch.no_grad():
        own = model.student(**batch)
        out = model(**batch)
    if student_type != "bert":
        torch.testing.assert_close(out.mlm_loss, own.loss)  # the student's own head and loss, at anchors only


def test_wrapping_a_loaded_student_keeps_its_attention_implementation():
    student = BertForPreTraining(BertConfig(**BERT_SHAPE, attn_implementation="eager"))
    model = TaclForPreTraining(tiny_tacl_config(student.config), student=student)
    # Building the TaCL config used to reset the student's own config to None, which every layer reads.
    assert student.config._attn_implementation == "eager"
    layers = [module for name, module in model.named_modules() if name.endswith("attention.self")]
    assert len(layers) == 2 * BERT_SHAPE["num_hidden_layers"]  # the student's and the teacher's
    assert {layer.config._attn_implementation for layer in layers} == {"eager"}


def test_the_embeddings_are_the_students_and_resizing_is_refused(tiny_model):
    assert tiny_model.get_input_embeddings() is tiny_model.student.bert.embeddings.word_embeddings
    assert tiny_model.get_output_embeddings() is tiny_model.student.cls.predictions.decoder
    assert tiny_model.get_input_embeddings() is not tiny_model.teacher.get_input_embeddings()
    with pytest.raises(ValueError, match=r"share one vocabulary.*resize_token_embeddings.*from_encoder"):
        tiny_model.resize_token_embeddings(VOCAB_SIZE + 8)
    assert tiny_model.get_input_embeddings().num_embeddings == VOCAB_SIZE


def test_a_student_that_drops_masked_tokens_is_rejected():
    with pytest.raises(ValueError, match="MAE-LM"):
        TaclForPreTraining(tiny_tacl_config(tiny_mae_lm_config()))


def test_from_encoder_refuses_an_incomplete_encoder(tmp_path):
    BertModel(STUDENT_CONFIGS["bert"]()).save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    del weights["encoder.layer.1.output.dense.weight"]
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"encoder.layer.1.output.dense.weight"):
        TaclForPreTraining.from_encoder(str(tmp_path))


def test_reloaded_teacher_stays_frozen_and_loading_is_strict(tiny_model, tmp_path):
    tiny_model.save_pretrained(tmp_path)
    reloaded = TaclForPreTraining.from_pretrained(tmp_path)
    assert not any(parameter.requires_grad for parameter in reloaded.teacher.parameters())
    assert all(parameter.requires_grad for parameter in reloaded.student.parameters())
    weights = load_file(tmp_path / "model.safetensors")
    del weights["teacher.encoder.layer.0.output.dense.weight"]
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"teacher.encoder.layer.0.output.dense.weight"):
        TaclForPreTraining.from_pretrained(tmp_path)


@pytest.fixture(scope="module")
def pairs(wordpiece_tokenizer):
    return build_sentence_pairs(documents_to_sentences(embedded_documents()[:20]), wordpiece_tokenizer, max_length=32)


@pytest.fixture(scope="module")
def masked_pairs(wordpiece_tokenizer, pairs):
    """The pairs masked once (32 tokens each). Trainer restores the RNG only after fetching the first batches of
    a resumed run, so dynamic masking would differ on that step whatever the model does; fixed masks isolate
    what resumption owes to the model: student, teacher, optimizer, scheduler and the dropout RNG."""
    batch = DataCollatorForTacl(wordpiece_tokenizer, pad_to_multiple_of=32, seed=0)(pairs.to_list())
    return Dataset.from_dict({key: value.tolist() for key, value in batch.items()})


def train_tiny(tokenizer, pairs, output_dir, resume_from_checkpoint=None, **overrides):
    torch.manual_seed(0)
    model = TaclForPreTraining(tiny_tacl_config(BertConfig(**{**BERT_SHAPE, "vocab_size": len(tokenizer)})))
    settings = dict(
        output_dir=str(output_dir),
        max_steps=4,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        learning_rate=1e-3,
        logging_steps=1,
        save_steps=2,
        report_to="none",
        use_cpu=True,
        seed=0,
        dataloader_pin_memory=False,
        disable_tqdm=True,
    )
    trainer = PretrainingTrainer(
        model=model,
        args=TrainingArguments(**{**settings, **overrides}),
        train_dataset=pairs,
        data_collator=default_data_collator,
    )
    initial = {name: value.clone() for name, value in model.state_dict().items()}
    trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    return trainer, initial


def test_trainer_keeps_the_teacher_frozen_logs_each_term_and_resumes_exactly(
    wordpiece_tokenizer, masked_pairs, tmp_path
):
    trainer, initial = train_tiny(wordpiece_tokenizer, masked_pairs, tmp_path / "run")
    model = trainer.model
    for name, parameter in model.teacher.named_parameters():
        assert (
            torch.equal(parameter, initial[f"teacher.{name}"])
            and parameter.grad is None
            and not parameter.requires_grad
        )
    optimized = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert not optimized & {id(p) for p in model.teacher.parameters()}
    embeddings = "student.bert.embeddings.word_embeddings.weight"
    assert not torch.equal(model.state_dict()[embeddings], initial[embeddings]), "the student trained"

    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logs) == 4
    for entry in logs:
        # Trainer divided each micro-batch loss by the 2 accumulation steps; the terms are micro-batch means.
        assert entry["loss"] == pytest.approx(entry["tacl_loss"] + entry["mlm_loss"] + entry["nsp_loss"], rel=1e-4)
    saved = json.loads((tmp_path / "run" / "checkpoint-4" / "trainer_state.json").read_text())
    assert "tacl_loss" in saved["log_history"][0]

    resumed, _ = train_tiny(
        wordpiece_tokenizer,
        masked_pairs,
        tmp_path / "run",
        resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-2"),
    )
    assert not any(p.requires_grad for p in resumed.model.teacher.parameters())
    final, again = model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(final[key], again[key]) for key in final), (
        "resumed training must match the uninterrupted run"
    )


FRESH_PROCESS_SCRIPT = textwrap.dedent(
    """
    import sys
    import torch, transformers
    from safetensors.torch import load_file, save_file

    batch, results = load_file(sys.argv[1]), {}
    with torch.no_grad():
        for path in sys.argv[3:]:
            name = path.rsplit("/", 1)[-1]
            for auto_class in ("AutoModelForSequenceClassification", "AutoModelForQuestionAnswering", "AutoModelForMaskedLM"):
                model = getattr(transformers, auto_class).from_pretrained(path).eval()
                results[f"{name}:{auto_class}"] = model.base_model(**batch).last_hidden_state
            results[f"{name}:mlm_logits"] = model(**batch).logits
            transformers.AutoTokenizer.from_pretrained(path)
    assert "hf_encoders" not in sys.modules
    save_file(results, sys.argv[2])
    """
)


def test_save_student_writes_plain_checkpoints_for_the_stock_scripts(wordpiece_tokenizer, tmp_path):
    _, batch = masked_batch()
    batch = {key: batch[key] for key in ("input_ids", "attention_mask")}
    expected = {}
    for student_type in ("bert", "roberta"):
        torch.manual_seed(0)
        model = TaclForPreTraining(tiny_tacl_config(STUDENT_CONFIGS[student_type]())).eval()
        model.save_student(tmp_path / student_type, tokenizer=wordpiece_tokenizer)
        config = json.loads((tmp_path / student_type / "config.json").read_text())
        assert config["model_type"] == student_type and "auto_map" not in config
        assert not list((tmp_path / student_type).glob("*.py"))
        with torch.no_grad():
            expected[student_type] = model(**batch)
    save_file(batch, tmp_path / "batch.safetensors")
    arguments = [str(tmp_path / name) for name in ("batch.safetensors", "out.safetensors", *expected)]
    completed = fresh_interpreter(FRESH_PROCESS_SCRIPT, arguments, tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = load_file(tmp_path / "out.safetensors")
    for student_type, out in expected.items():
        for auto_class in (
            "AutoModelForSequenceClassification",
            "AutoModelForQuestionAnswering",
            "AutoModelForMaskedLM",
        ):
            torch.testing.assert_close(results[f"{student_type}:{auto_class}"], out.last_hidden_state, msg=auto_class)
        torch.testing.assert_close(results[f"{student_type}:mlm_logits"], out.logits)

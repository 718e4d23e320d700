"""Biphasic model: each test compares against transformers' own Llama/EuroBERT/Qwen2/Mistral on the same weights,
or against a computation done by hand."""

import pytest
import torch
import transformers
from transformers import (
    AutoModel,
    AutoModelForPreTraining,
    AutoModelForSequenceClassification,
    BertConfig,
    EuroBertConfig,
    EuroBertForMaskedLM,
    GPT2Config,
    GPT2LMHeadModel,
    MistralConfig,
    MistralForCausalLM,
    MixtralConfig,
    Qwen2Config,
    Qwen2ForCausalLM,
)
from transformers.testing_utils import CaptureLogger

from hf_encoders import (
    BiphasicConfig,
    BiphasicEncoder,
    BiphasicEncoderForMaskedLM,
    BiphasicEncoderForPreTraining,
    BiphasicEncoderForQuestionAnswering,
    BiphasicEncoderForSequenceClassification,
    BiphasicEncoderForTokenClassification,
)
from hf_encoders.methods.biphasic import conversion as biphasic_conversion
from hf_encoders.methods.biphasic.conversion import MASK_TOKEN, convert_causal_lm, prepare_tokenizer
from tests.helpers import assert_close_at_real_tokens
from tests.tiny_models import (
    LLAMA_SHAPE,
    MASK_TOKEN_ID,
    VOCAB_SIZE,
    sample_batch,
    tiny_biphasic_config,
    tiny_llama,
    tiny_tokenizer,
)


def padded_batch(padding_side="right"):
    batch = sample_batch(seed=1, length=12)
    if padding_side == "left":
        batch = {name: tensor.roll(3, dims=1) for name, tensor in batch.items()}
    return batch


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
def test_clm_logits_equal_llama_with_gqa_and_padding(padding_side, attn_implementation):
    llama = tiny_llama(rope_theta=500000.0)
    llama.set_attn_implementation(attn_implementation)
    ours = BiphasicEncoderForPreTraining.from_causal_lm(llama)
    ours.set_attn_implementation(attn_implementation)
    assert ours.config.num_key_value_heads == 2 and ours.config.rope_parameters["rope_theta"] == 500000.0
    batch = padded_batch(padding_side)
    with torch.no_grad():
        expected = llama(**batch).logits
        got = ours(**batch, objective="clm").logits
    assert_close_at_real_tokens(got, expected, batch["attention_mask"], rtol=0, atol=1e-5)


def test_objective_switches_the_mask():
    model = BiphasicEncoderForPreTraining(tiny_biphasic_config()).eval()
    ids = sample_batch()["input_ids"][:1]
    changed = ids.clone()
    changed[0, -1] = 5 if ids[0, -1] != 5 else 6
    with torch.no_grad():
        for objective, future_visible in (("clm", False), ("mlm", True)):
            before = model(input_ids=ids, objective=objective).logits[0, :-1]
            after = model(input_ids=changed, objective=objective).logits[0, :-1]
            assert (not torch.allclose(before, after)) == future_visible, objective
    assert model.objective == "mlm"  # the default objective is the encoder's


def reference_eurobert(model: BiphasicEncoderForMaskedLM) -> EuroBertForMaskedLM:
    """transformers' EuroBERT built from a hand-written config, loaded with our weights."""
    config = EuroBertConfig(**LLAMA_SHAPE, mask_token_id=MASK_TOKEN_ID, tie_word_embeddings=False)
    eurobert = EuroBertForMaskedLM(config).eval()
    eurobert.load_state_dict(model.state_dict(), strict=True)
    return eurobert


@pytest.mark.parametrize("model_class", [BiphasicEncoderForMaskedLM, BiphasicEncoderForPreTraining])
def test_mlm_logits_equal_eurobert_with_padding(model_class):
    torch.manual_seed(0)
    ours = model_class(tiny_biphasic_config()).eval()
    batch = sample_batch()
    with torch.no_grad():
        expected = reference_eurobert(ours)(**batch).logits
        assert_close_at_real_tokens(ours(**batch).logits, expected, batch["attention_mask"], rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "model_class,overrides",
    [
        (BiphasicEncoder, {}),
        (BiphasicEncoderForPreTraining, {"tie_word_embeddings": True}),
        (BiphasicEncoderForMaskedLM, {"mlp_bias": True, "attention_bias": True}),
        (BiphasicEncoderForSequenceClassification, {"classifier_pooling": "mean"}),
        (BiphasicEncoderForSequenceClassification, {"classifier_pooling": "cls"}),
        (BiphasicEncoderForTokenClassification, {}),
    ],
)
def test_eurobert_export_is_exact(model_class, overrides, tmp_path):
    torch.manual_seed(0)
    ours = model_class(tiny_biphasic_config(**overrides)).eval()
    exported = ours.to_eurobert()
    assert type(exported).__module__.startswith("transformers.models.eurobert")
    exported.save_pretrained(tmp_path)
    reloaded = getattr(transformers, type(exported).__name__).from_pretrained(tmp_path).eval()
    batch = sample_batch()
    with torch.no_grad():
        expected = ours(**batch).to_tuple()[0]
        got = reloaded(**batch).to_tuple()[0]
        assert_close_at_real_tokens(got, expected, batch["attention_mask"], rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "model_class,overrides",
    [
        (BiphasicEncoderForQuestionAnswering, {}),
        (BiphasicEncoderForSequenceClassification, {"classifier_pooling": "last"}),
    ],
)
def test_eurobert_export_refuses_what_it_cannot_represent(model_class, overrides):
    with pytest.raises(ValueError, match="EuroBERT"):
        model_class(tiny_biphasic_config(**overrides)).to_eurobert()


def test_clm_projects_only_positions_with_a_next_token():
    """Each row's last position (and padding) has no next token: the vocabulary projection skips it."""
    torch.manual_seed(0)
    model = BiphasicEncoderForPreTraining(tiny_biphasic_config()).eval()
    batch = sample_batch()
    labels = torch.full_like(batch["input_ids"], -100)
    labels[:, :-1] = batch["input_ids"][:, 1:]
    labels[batch["attention_mask"] == 0] = -100
    model.compact_eval_logits = True  # the training layout, in eval
    with torch.no_grad():
        full = model(**batch, objective="clm").logits
        out = model(**batch, labels=labels, objective="clm")
    labelled = labels != -100
    torch.testing.assert_close(out.logits, full[labelled])
    torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(full[labelled], labels[labelled]))


def test_mlm_vocabulary_projection_runs_only_at_target_positions():
    torch.manual_seed(0)
    model = BiphasicEncoderForPreTraining(tiny_biphasic_config()).eval()
    batch = sample_batch()
    labels = torch.full_like(batch["input_ids"], -100)
    labels[:, 3] = torch.tensor([7, 8])  # the [MASK] column
    labels[0, 7] = 9
    model.compact_eval_logits = True  # the training layout, in eval
    with torch.no_grad():
        full = model(**batch).logits
        out = model(**batch, labels=labels)
    labelled = labels != -100
    assert out.logits.shape == (3, VOCAB_SIZE)
    torch.testing.assert_close(out.logits, full[labelled])
    expected = torch.nn.functional.cross_entropy(full[labelled], labels[labelled])
    torch.testing.assert_close(out.loss, expected)


def test_clm_loss_is_next_token_cross_entropy_of_llama():
    llama = tiny_llama()
    ours = BiphasicEncoderForPreTraining.from_causal_lm(llama)
    batch = padded_batch()
    # Already-shifted labels, as DataCollatorForBiphasic makes them; Llama takes unshifted ones and shifts itself.
    shifted = torch.full_like(batch["input_ids"], -100)
    shifted[:, :-1] = batch["input_ids"][:, 1:]
    shifted[:, :-1][batch["attention_mask"][:, 1:] == 0] = -100
    unshifted = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    with torch.no_grad():
        torch.testing.assert_close(
            ours(**batch, labels=shifted, objective="clm").loss, llama(**batch, labels=unshifted).loss
        )


def test_labels_equal_to_the_inputs_are_refused_on_each_objectives_first_batch_with_targets():
    model = BiphasicEncoderForPreTraining(tiny_biphasic_config())
    batch = sample_batch()
    identity = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    shifted = torch.cat([batch["input_ids"][:, 1:], torch.full_like(batch["input_ids"][:, :1], -100)], dim=1)
    model(**batch, labels=torch.full_like(identity, -100), objective="clm")  # no targets: nothing to check yet
    with pytest.raises(ValueError, match="next-token labels"):
        model(**batch, labels=identity, objective="clm")
    model(**batch, labels=shifted, objective="clm")
    with pytest.raises(ValueError, match="masked inputs for MLM"):  # CLM passing does not vouch for MLM's labels
        model(**batch, labels=identity, objective="mlm")


def test_pre_training_picks_the_view_of_its_objective():
    torch.manual_seed(0)
    model = BiphasicEncoderForPreTraining(tiny_biphasic_config()).eval()
    batch = sample_batch()
    clean, masked = batch["input_ids"].clone(), batch["input_ids"]
    clean[:, 3] = 9
    clm_labels = torch.full_like(clean, -100)
    clm_labels[:, :5] = clean[:, 1:6]
    mlm_labels = torch.full_like(clean, -100)
    mlm_labels[:, 3] = 9
    two_views = dict(
        input_ids=clean,
        attention_mask=batch["attention_mask"],
        labels=clm_labels,
        mlm_input_ids=masked,
        mlm_labels=mlm_labels,
    )
    with torch.no_grad():
        for objective, input_ids, labels in (("clm", clean, clm_labels), ("mlm", masked, mlm_labels)):
            expected = model(
                input_ids=input_ids, attention_mask=batch["attention_mask"], labels=labels, objective=objective
            )
            model.objective = objective
            got = model(**two_views)
            torch.testing.assert_close(got.loss, expected.loss)
            assert type(got).__name__ == {"clm": "CausalLMOutput", "mlm": "MaskedLMOutput"}[objective]


def test_eos_embedding_trains_when_pad_is_eos():
    model = BiphasicEncoderForPreTraining(tiny_biphasic_config(pad_token_id=2))
    assert model.model.embed_tokens.padding_idx is None
    ids = torch.tensor([[5, 6, 2, 7, 8, 2]])
    labels = torch.tensor([[6, 2, 7, 8, 2, -100]])
    model(input_ids=ids, labels=labels, objective="clm").loss.backward()
    assert model.model.embed_tokens.weight.grad[2].abs().sum() > 0


@pytest.mark.parametrize("pooling", ["mean", "cls", "last"])
def test_sequence_classification_pooling(pooling):
    torch.manual_seed(0)
    model = BiphasicEncoderForSequenceClassification(tiny_biphasic_config(classifier_pooling=pooling)).eval()
    batch = sample_batch()
    with torch.no_grad():
        states = model.model(**batch).last_hidden_state
        logits = model(**batch).logits
    rows = []
    for row, mask in zip(states, batch["attention_mask"]):
        real = row[mask.bool()]
        rows.append({"mean": real.mean(0), "cls": row[0], "last": real[-1]}[pooling])
    expected = model.classifier(model.activation(model.dense(torch.stack(rows))))
    torch.testing.assert_close(logits, expected)


def test_task_heads_load_a_pre_training_checkpoint_and_refuse_a_foreign_one(tmp_path):
    BiphasicEncoderForPreTraining(tiny_biphasic_config()).save_pretrained(tmp_path / "pretrained")
    classifier = AutoModelForSequenceClassification.from_pretrained(tmp_path / "pretrained", num_labels=2)
    assert isinstance(classifier, BiphasicEncoderForSequenceClassification) and classifier.classifier.out_features == 2
    assert isinstance(AutoModel.from_pretrained(tmp_path / "pretrained"), BiphasicEncoder)  # the LM head is dropped
    BiphasicEncoderForPreTraining(tiny_biphasic_config(num_hidden_layers=3)).save_pretrained(tmp_path / "deeper")
    with pytest.raises(ValueError, match="does not fit"):
        BiphasicEncoderForPreTraining.from_pretrained(tmp_path / "deeper", num_hidden_layers=2)


def test_sequences_longer_than_the_position_limit_are_refused():
    model = BiphasicEncoder(tiny_biphasic_config(max_position_embeddings=8))
    with pytest.raises(ValueError, match="max_position_embeddings=8"):
        model(input_ids=torch.ones(1, 9, dtype=torch.long))


def test_qwen2_biases_convert_through_attention_bias():
    torch.manual_seed(0)
    qwen = Qwen2ForCausalLM(Qwen2Config(**LLAMA_SHAPE)).eval()
    for name, parameter in qwen.named_parameters():
        if name.endswith("bias"):
            torch.nn.init.normal_(parameter)  # Qwen2 initialises them to zero; make them matter
    ours = BiphasicEncoderForPreTraining.from_causal_lm(qwen)
    assert ours.config.attention_bias and not ours.model.layers[0].self_attn.o_proj.bias.any()
    batch = padded_batch()
    with torch.no_grad():
        got = ours(**batch, objective="clm").logits
        assert_close_at_real_tokens(got, qwen(**batch).logits, batch["attention_mask"], rtol=0, atol=1e-5)


def test_mistral_sliding_window_becomes_the_position_limit():
    torch.manual_seed(0)
    mistral = MistralForCausalLM(MistralConfig(**LLAMA_SHAPE, sliding_window=8, head_dim=16)).eval()
    ours = BiphasicEncoderForPreTraining.from_causal_lm(mistral)
    assert ours.config.max_position_embeddings == 8 and ours.config.head_dim == 16
    ids = sample_batch(length=8)["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(
            ours(input_ids=ids, objective="clm").logits, mistral(input_ids=ids).logits, rtol=0, atol=1e-5
        )


@pytest.mark.parametrize(
    "config",
    [
        GPT2Config(vocab_size=VOCAB_SIZE, n_embd=32, n_layer=1, n_head=4),
        BertConfig(vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=1, num_attention_heads=4),
        MixtralConfig(**LLAMA_SHAPE, num_local_experts=2),
    ],
    ids=["gpt2", "bert", "mixtral"],
)
def test_unrepresentable_architectures_are_refused_before_loading_weights(config, tmp_path):
    config.save_pretrained(tmp_path)  # a config without weights: refusal must not need them
    with pytest.raises(ValueError, match=f"Cannot convert a '{config.model_type}' model"):
        BiphasicEncoderForPreTraining.from_causal_lm(tmp_path)


def test_a_loaded_gpt2_is_refused():
    with pytest.raises(ValueError, match="Llama-family"):
        BiphasicEncoderForPreTraining.from_causal_lm(
            GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB_SIZE, n_embd=32, n_layer=1, n_head=4))
        )


def test_convert_adds_a_mask_token_and_keeps_the_causal_lm(tmp_path):
    # A causal LM's tokenizer: no pad token, no mask token.
    tokenizer = tiny_tokenizer("llama", pad_token=None, mask_token=None)
    llama = tiny_llama(pad_token_id=None)
    llama.save_pretrained(tmp_path / "llama")
    tokenizer.save_pretrained(tmp_path / "llama")

    out = convert_causal_lm(tmp_path / "llama", tmp_path / "converted")
    model = AutoModelForPreTraining.from_pretrained(out).eval()
    assert isinstance(model, BiphasicEncoderForPreTraining)
    assert model.config.mask_token_id == VOCAB_SIZE and model.config.vocab_size == VOCAB_SIZE + 1
    assert model.config.pad_token_id == model.config.eos_token_id == 2
    reloaded = transformers.AutoTokenizer.from_pretrained(out)
    assert reloaded.mask_token == MASK_TOKEN and reloaded.mask_token_id == VOCAB_SIZE
    ids = sample_batch()["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(
            model(input_ids=ids, objective="clm").logits[..., :VOCAB_SIZE], llama(input_ids=ids).logits
        )


def test_presets_have_the_paper_sizes():
    sizes = {}
    for name in ("210m", "610m", "1b"):
        with torch.device("meta"):
            encoder = BiphasicEncoder(BiphasicConfig.from_preset(name))
        sizes[name] = sum(p.numel() for p in encoder.parameters()) / 1e6
    # The encoder alone (embeddings included, LM head excluded), as EuroBERT counts its sizes.
    assert 205 < sizes["210m"] < 215 and 600 < sizes["610m"] < 620 and 1000 < sizes["1b"] < 1250, sizes


def test_the_mask_token_added_to_a_tokenizer_without_one_is_said_once():
    tokenizer = tiny_tokenizer("llama", mask_token=None)
    with CaptureLogger(biphasic_conversion.logger) as captured:
        prepare_tokenizer(tokenizer)
        prepare_tokenizer(tokenizer)  # prepared again (a resumed run's saved tokenizer): nothing more to add or say
    assert tokenizer.mask_token == "<|mask|>" and tokenizer.mask_token_id == len(tokenizer) - 1
    assert captured.out == (
        f"The tokenizer has no mask token, which MLM needs: added <|mask|> as token {tokenizer.mask_token_id} (its "
        "embedding is new and learns during the MLM phase).\n"
    )

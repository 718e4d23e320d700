"""`pretrain --init_from_smaller`: a model widened from a smaller checkpoint of its family computes the checkpoint's
outputs at initialisation, its copies learn apart, and a checkpoint that does not tile into the new model is refused
with what to change."""

import pytest
import torch

from hf_encoders import BiphasicEncoderForPreTraining, MaeLmForMaskedLM
from hf_encoders.methods.mae_lm.recipe import SIZES
from hf_encoders.models.mae_lm import MaeLmConfig
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.growth import grow_into, layer_sources
from hf_encoders.training.pretrain import pretrain
from hf_encoders.training.recipe import get_recipe
from tests.helpers import tiny_training_arguments
from tests.tiny_models import MASK_TOKEN_ID, corpus_tokenizer, tiny_biphasic_config, tiny_mae_lm_config

WIDER_MAE_LM = dict(hidden_size=96, num_attention_heads=12, intermediate_size=192)  # 3 x tiny_mae_lm_config's
WIDER_BIPHASIC = dict(hidden_size=64, num_attention_heads=8, num_key_value_heads=4, intermediate_size=128)
# (model class, tiny config, the wider settings, factor)
FAMILIES = {
    "mae_lm": (MaeLmForMaskedLM, tiny_mae_lm_config, WIDER_MAE_LM, 3),
    "biphasic": (BiphasicEncoderForPreTraining, tiny_biphasic_config, WIDER_BIPHASIC, 2),
    "biphasic-deeper": (BiphasicEncoderForPreTraining, tiny_biphasic_config, dict(num_hidden_layers=5), 1),
    "biphasic-wider-deeper": (
        BiphasicEncoderForPreTraining,
        tiny_biphasic_config,
        dict(WIDER_BIPHASIC, num_hidden_layers=3),
        2,
    ),
    "biphasic-tied": (
        BiphasicEncoderForPreTraining,
        lambda **overrides: tiny_biphasic_config(tie_word_embeddings=True, **overrides),
        WIDER_BIPHASIC,
        2,
    ),
}


def batch() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 64, (2, 12), generator=generator)
    ids[:, 3] = MASK_TOKEN_ID  # MAE-LM: the decoder reads [MASK]'s embedding, the encoder leaves it out
    ids[1, 9:] = 0  # padding
    return {"input_ids": ids, "attention_mask": torch.tensor([[1] * 12, [1] * 9 + [0] * 3])}


def grown_pair(family: str, tmp_path):
    model_class, config, wider, factor = FAMILIES[family]
    torch.manual_seed(0)
    small = model_class(config())
    small.save_pretrained(tmp_path)
    return small.eval(), grow_into(model_class(config(**wider)), str(tmp_path)).eval(), factor


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_widened_model_computes_the_checkpoints_outputs(family, tmp_path):
    small, large, factor = grown_pair(family, tmp_path)
    inputs = batch()
    real = inputs["attention_mask"].bool()
    with torch.no_grad():
        torch.testing.assert_close(large(**inputs).logits[real], small(**inputs).logits[real], rtol=0, atol=1e-5)
        expected, got = (model.base_model(**inputs).last_hidden_state[real] for model in (small, large))
    # The encoder's states: the checkpoint's repeated `factor` times (divided by it before a tied projection).
    expected = expected / (factor if family == "biphasic-tied" else 1)
    torch.testing.assert_close(got, expected.repeat(1, factor), rtol=0, atol=1e-5)


@pytest.mark.parametrize("family", ["mae_lm", "biphasic"])
def test_the_copies_learn_apart(family, tmp_path):
    """Each linear layer reads its copies through unequal shares, so a step moves them differently; even shares
    would keep them equal for ever."""
    _, large, factor = grown_pair(family, tmp_path)
    inputs = batch()
    labels = torch.where(inputs["input_ids"] == MASK_TOKEN_ID, 7, -100)
    if family == "biphasic":
        large.objective = "mlm"
    # In eval mode: dropout, which would tell the copies apart by itself, is off.
    optimizer = torch.optim.SGD(large.parameters(), lr=0.5)
    large(**inputs, labels=labels).loss.backward()
    optimizer.step()
    copies = large.get_input_embeddings().weight.detach().chunk(factor, dim=1)
    assert not torch.allclose(copies[0], copies[1])


def tiny_mae_lm_checkpoint(folder, tokenizer) -> str:
    """tiny, half as wide: the checkpoint `--model_size tiny` widens two times."""
    half = dict(SIZES["tiny"], hidden_size=32, num_attention_heads=1, intermediate_size=128, decoder_locality_slope=0)
    config = MaeLmConfig(vocab_size=len(tokenizer), mask_token_id=tokenizer.mask_token_id, **half)
    MaeLmForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_pretrain_starts_from_the_widened_checkpoint(tmp_path):
    tokenizer = corpus_tokenizer()
    small_dir = tiny_mae_lm_checkpoint(tmp_path / "small", tokenizer)
    args = PretrainArguments(
        method="mae_lm",
        init_from_smaller=small_dir,
        model_size="tiny",
        config_overrides="decoder_locality_slope=0",  # the checkpoint's decoder, the paper's
        max_documents=20,
        block_size=32,
    )
    get_recipe("mae_lm").check_arguments(args)
    model = get_recipe("mae_lm").build_model(args, tokenizer).eval()
    assert model.config.hidden_size == 64
    inputs = batch()
    with torch.no_grad():
        torch.testing.assert_close(
            model(**inputs).logits,
            MaeLmForMaskedLM.from_pretrained(small_dir).eval()(**inputs).logits,
            atol=1e-5,
            rtol=0,
        )
    result = pretrain(args, tiny_training_arguments(tmp_path / "out", max_steps=2, eval_strategy="no"))
    assert result.trainer.state.global_step == 2
    assert (
        f"initialised from the smaller {small_dir}, grown so that its outputs"
        in (tmp_path / "out" / "README.md").read_text()
    )


# (what the new model changes, the refusal)
REFUSALS = [
    (
        dict(hidden_size=96, num_attention_heads=4, intermediate_size=192),
        r"one whole factor \(the head size kept\), but hidden_size 32 -> 96, num_attention_heads 4 -> 4",
    ),
    (dict(WIDER_MAE_LM, num_hidden_layers=3), r"has num_hidden_layers 2, the new model 3: the tiling widens a model"),
    (dict(WIDER_MAE_LM, relative_attention_num_buckets=16), "set it to 8 with --config_overrides"),
    (dict(WIDER_MAE_LM, decoder_locality_slope=1.0), "decoder_locality_slope 0.0, the new model 1.0"),
    ({}, "is as large as the new model \\(hidden_size 32, 2 layers\\): continue it with --model_name_or_path"),
]


@pytest.mark.parametrize("wider, message", REFUSALS)
def test_a_checkpoint_that_does_not_tile_is_refused(wider, message, tmp_path):
    MaeLmForMaskedLM(tiny_mae_lm_config()).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=message):
        grow_into(MaeLmForMaskedLM(tiny_mae_lm_config(**wider)), str(tmp_path))


def test_a_decoder_locality_bias_is_refused_when_its_heads_would_be_copied(tmp_path):
    """Its slope halves from head to head: a widened head's copies would get other slopes than the head they copy."""
    MaeLmForMaskedLM(tiny_mae_lm_config(decoder_locality_slope=1.0)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"decoder_locality_slope 1\.0 gives each head its own value"):
        grow_into(MaeLmForMaskedLM(tiny_mae_lm_config(**WIDER_MAE_LM, decoder_locality_slope=1.0)), str(tmp_path))


def test_a_biphasic_model_grows_deeper_but_never_shallower(tmp_path):
    assert layer_sources(2, 5) == [0, 0, 0, 1, 1]  # each added layer after the one it copies
    BiphasicEncoderForPreTraining(tiny_biphasic_config(num_hidden_layers=3)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="has 3 layers, the new model 2: the tiling adds layers and never drops one"):
        grow_into(BiphasicEncoderForPreTraining(tiny_biphasic_config(**WIDER_BIPHASIC)), str(tmp_path))


def test_the_checkpoints_padded_vocabulary_is_kept_and_a_larger_tokenizer_refused(tmp_path):
    torch.manual_seed(0)
    small = MaeLmForMaskedLM(tiny_mae_lm_config(vocab_size=80)).eval()  # 64 tokens, padded to 80 on a GPU
    small.save_pretrained(tmp_path)
    large = grow_into(MaeLmForMaskedLM(tiny_mae_lm_config(**WIDER_MAE_LM)), str(tmp_path)).eval()
    assert large.config.vocab_size == 80
    with torch.no_grad():
        torch.testing.assert_close(large(**batch()).logits, small(**batch()).logits, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"The tokenizer has 96 tokens but --init_from_smaller .* only 80 embeddings"):
        grow_into(MaeLmForMaskedLM(tiny_mae_lm_config(vocab_size=96, **WIDER_MAE_LM)), str(tmp_path))


def test_a_checkpoint_of_another_family_is_refused(tmp_path):
    BiphasicEncoderForPreTraining(tiny_biphasic_config()).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="is a 'biphasic' checkpoint; this run builds a 'mae_lm' model"):
        grow_into(MaeLmForMaskedLM(tiny_mae_lm_config(**WIDER_MAE_LM)), str(tmp_path))


def test_a_grown_biphasic_model_continues_with_mlm_by_default():
    """Grown from a trained checkpoint, the model continues its training (CPT's default), not a new CLM phase."""
    recipe = get_recipe("biphasic")
    args = PretrainArguments(method="biphasic", init_from_smaller="out/small")
    assert recipe.phases(args) == "mlm:1.0"
    assert recipe.card_variables(args)["how_trained"].startswith("grown from the smaller checkpoint out/small and")
    assert recipe.phases(PretrainArguments(method="biphasic")) == "clm:0.25,mlm:0.75"

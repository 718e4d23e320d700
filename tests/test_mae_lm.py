"""MAE-LM: each test compares the model with an independent computation or pins a documented behaviour."""

import json
import math

import pytest
import torch
from torch import nn

from hf_encoders import (
    MaeLmConfig,
    MaeLmForMaskedLM,
    MaeLmForQuestionAnswering,
    MaeLmForSequenceClassification,
    MaeLmForTokenClassification,
    MaeLmModel,
)
from hf_encoders.models.mae_lm.modeling_mae_lm import relative_position_bucket
from tests.tiny_models import MASK_TOKEN_ID, sample_batch, tiny_mae_lm_config


def reference_bucket(relative: int, num_buckets: int, max_distance: int) -> int:
    """The released code's formula (yumeng5/MAE-LM, `relative_position_bucket` in
    fairseq/modules/transformer_sentence_encoder.py), one scalar at a time, then the reference's shift: minus the
    minimum over a table long enough to saturate."""
    half = num_buckets // 2
    max_exact = half // 2
    distance = abs(relative)
    if distance < max_exact:
        bucket = distance
    else:
        bucket = math.ceil(
            math.log(distance / max_exact) / math.log((max_distance - 1) / max_exact) * (half - 1 - max_exact)
        )
        bucket = min(bucket + max_exact, half - 1)
    signed = bucket * (1 if relative > 0 else -1 if relative < 0 else 0)
    return signed + (half - 1)


@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (64, 128), (128, 256)])
def test_relative_buckets_match_the_reference_formula(num_buckets, max_distance):
    relative = torch.arange(-600, 601)
    ours = relative_position_bucket(relative, num_buckets, max_distance).tolist()
    assert ours == [reference_bucket(r, num_buckets, max_distance) for r in relative.tolist()]
    assert min(ours) == 0 and max(ours) == num_buckets - 2  # one row unused, as in the reference


def test_buckets_saturate_where_the_reference_does():
    buckets = relative_position_bucket(torch.arange(0, 200), 64, 128)
    assert len(set(buckets.tolist())) == 32 and buckets[111] == buckets[199] != buckets[110]


def compact_by_hand(input_ids, attention_mask):
    """Kept ids and their original positions, row by row in plain Python, right-padded."""
    rows = [
        [(token, position) for position, (token, real) in enumerate(zip(ids, mask)) if real and token != MASK_TOKEN_ID]
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist())
    ]
    width = max(len(row) for row in rows)
    ids = torch.tensor([[t for t, _ in row] + [0] * (width - len(row)) for row in rows])
    positions = torch.tensor([[p for _, p in row] + [0] * (width - len(row)) for row in rows])
    mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows])
    return ids, positions, mask, rows


def test_encoder_sees_only_kept_tokens_at_their_original_positions():
    torch.manual_seed(0)
    model = MaeLmForMaskedLM(tiny_mae_lm_config()).eval()
    batch = sample_batch(length=16)
    with torch.no_grad():
        scattered = model(**batch).encoder_last_hidden_state
        ids, positions, mask, rows = compact_by_hand(batch["input_ids"], batch["attention_mask"])
        expected = model.mae_lm(input_ids=ids, attention_mask=mask, position_ids=positions).last_hidden_state
    for row, kept in enumerate(rows):
        for slot, (_, position) in enumerate(kept):
            torch.testing.assert_close(scattered[row, position], expected[row, slot])
    seen = torch.zeros_like(batch["input_ids"], dtype=torch.bool)
    for row, kept in enumerate(rows):
        seen[row, [p for _, p in kept]] = True
    assert scattered[~seen].abs().max() == 0, "positions the encoder never saw must be zeros"


def test_relative_bias_uses_the_aligned_positions():
    """The bias comes from the distances between the positions given (a compacted input keeps its original ones),
    not between slots: against the table looked up by hand, and through the encoder with the absolute position
    embeddings zeroed (otherwise they alone would tell the positions apart), where only those distances may count."""
    torch.manual_seed(0)
    config = tiny_mae_lm_config()
    encoder = MaeLmModel(config).eval()
    with torch.no_grad():
        encoder.relative_attention_bias.weight.normal_()  # far from the small initial values: every bucket differs
        encoder.embeddings.position_embeddings.weight.zero_()
    gapped = [0, 2, 3, 7, 30]  # distances 1 to 30, some past relative_attention_max_distance
    buckets = torch.tensor(
        [
            [
                reference_bucket(
                    key - query, config.relative_attention_num_buckets, config.relative_attention_max_distance
                )
                for key in gapped
            ]
            for query in gapped
        ]
    )
    expected = encoder.relative_attention_bias.weight[buckets].permute(2, 0, 1)[None]  # (1, heads, query, key)
    torch.testing.assert_close(encoder.attention_bias(torch.tensor([gapped]), None, torch.float32), expected)

    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        states = {
            name: encoder(ids, position_ids=torch.tensor([positions])).last_hidden_state
            for name, positions in (
                ("gapped", gapped),
                ("shifted", [p + 10 for p in gapped]),
                ("slots", [0, 1, 2, 3, 4]),
            )
        }
    torch.testing.assert_close(states["shifted"], states["gapped"])  # the same distances: the same output
    assert not torch.allclose(states["slots"], states["gapped"])  # other distances: another output


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("padded", [False, True])
def test_default_positions_share_one_bias_across_the_batch(attn_implementation, padded):
    """Without position ids the bias is gathered once for the whole batch; outputs and every gradient
    (the bias table's included) equal those of explicit per-row positions."""
    torch.manual_seed(0)
    config = tiny_mae_lm_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config._attn_implementation = attn_implementation
    encoder = MaeLmModel(config)
    batch = sample_batch(batch_size=3)
    if not padded:
        batch.pop("attention_mask")
    rows, length = batch["input_ids"].shape
    shared = encoder.attention_bias(torch.arange(length)[None], batch.get("attention_mask"), torch.float32)
    assert shared.shape == ((rows if padded else 1), config.num_attention_heads, length, length)
    gathered = []  # the bucket indices each forward looks up
    encoder.relative_attention_bias.register_forward_hook(lambda module, ids, output: gathered.append(ids[0].shape))

    def run(**positions):
        encoder.zero_grad()
        states = encoder(**batch, **positions).last_hidden_state
        states.square().sum().backward()
        return states.detach(), {name: p.grad.clone() for name, p in encoder.named_parameters()}

    states, gradients = run()
    per_row_states, per_row_gradients = run(position_ids=torch.arange(length).expand(rows, -1))
    assert gathered == [(1, length, length), (rows, length, length)]
    torch.testing.assert_close(states, per_row_states)
    assert gradients["relative_attention_bias.weight"].abs().sum() > 0
    for name, gradient in per_row_gradients.items():
        torch.testing.assert_close(gradients[name], gradient, msg=name)


def test_masked_lm_takes_one_row_of_positions_for_the_whole_batch():
    torch.manual_seed(0)
    model = MaeLmForMaskedLM(tiny_mae_lm_config()).eval()
    batch = sample_batch(batch_size=3)
    length = batch["input_ids"].shape[1]
    with torch.no_grad():
        one_row = model(**batch, position_ids=torch.arange(length)[None]).logits
        default = model(**batch).logits
    torch.testing.assert_close(one_row, default)


def test_loss_is_cross_entropy_at_masked_positions():
    torch.manual_seed(0)
    model = MaeLmForMaskedLM(tiny_mae_lm_config()).eval()
    batch = sample_batch()
    labels = torch.full_like(batch["input_ids"], -100)
    masked = batch["input_ids"] == MASK_TOKEN_ID
    labels[masked] = torch.randint(5, 64, (int(masked.sum()),))
    model.compact_eval_logits = True  # the training layout, in eval
    with torch.no_grad():
        with_labels = model(**batch, labels=labels)
        full_logits = model(**batch).logits
    assert with_labels.logits.shape == (int(masked.sum()), 64)
    torch.testing.assert_close(with_labels.logits, full_logits[masked])
    torch.testing.assert_close(with_labels.loss, nn.functional.cross_entropy(full_logits[masked], labels[masked]))


def test_num_items_in_batch_normalises_the_summed_loss():
    torch.manual_seed(0)
    model = MaeLmForMaskedLM(tiny_mae_lm_config()).eval()
    batch = sample_batch()
    labels = torch.where(batch["input_ids"] == MASK_TOKEN_ID, 7, -100)
    with torch.no_grad():
        mean = model(**batch, labels=labels).loss
        over_ten = model(**batch, labels=labels, num_items_in_batch=10).loss
    torch.testing.assert_close(over_ten, mean * int((labels != -100).sum()) / 10)


def test_delta_one_puts_every_mask_into_the_encoder():
    torch.manual_seed(0)
    model = MaeLmForMaskedLM(tiny_mae_lm_config()).eval()
    batch = sample_batch()
    with torch.no_grad():
        scattered = model(**batch, masks_in_encoder=batch["input_ids"] == MASK_TOKEN_ID).encoder_last_hidden_state
        plain = model.mae_lm(**batch).last_hidden_state
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(scattered[real], plain[real])


def test_delta_zero_hides_every_mask_from_the_encoder():
    model = MaeLmForMaskedLM(tiny_mae_lm_config()).eval()
    batch = sample_batch()
    with torch.no_grad():
        scattered = model(**batch).encoder_last_hidden_state
    assert scattered[batch["input_ids"] == MASK_TOKEN_ID].abs().max() == 0


def test_the_model_draws_no_random_numbers_of_its_own():
    """δ is the batch's: a forward in eval, with or without `masks_in_encoder`, leaves the global RNG untouched and
    gives the same outputs twice."""
    model = MaeLmForMaskedLM(tiny_mae_lm_config()).eval()
    batch = sample_batch()
    half = (batch["input_ids"] == MASK_TOKEN_ID) & (torch.arange(batch["input_ids"].shape[1]) % 2 == 0)
    for kept in ({}, {"masks_in_encoder": half}):
        state = torch.get_rng_state()
        with torch.no_grad():
            first, second = (model(**batch, **kept).encoder_last_hidden_state for _ in range(2))
        assert torch.equal(torch.get_rng_state(), state)
        torch.testing.assert_close(first, second, rtol=0, atol=0)


def test_a_config_with_the_old_delta_field_loads_without_it_and_warns_once(tmp_path, caplog):
    """δ left the config: a config.json written before (hf-encoders 0.2) still loads, drops the field, and says
    once where δ went when it was not 0."""
    from hf_encoders.models.mae_lm import configuration_mae_lm

    config = tiny_mae_lm_config().to_dict()
    for delta, folder in ((0.0, tmp_path / "zero"), (0.5, tmp_path / "half")):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({**config, "mask_in_encoder_fraction": delta}))
    with caplog.at_level("WARNING", logger=configuration_mae_lm.logger.name):
        assert not hasattr(MaeLmConfig.from_pretrained(tmp_path / "zero"), "mask_in_encoder_fraction")
        assert not caplog.records
        for _ in range(2):
            loaded = MaeLmConfig.from_pretrained(tmp_path / "half")
    assert [record.getMessage() for record in caplog.records] == [configuration_mae_lm.delta_moved_warning(0.5)]
    assert "DataCollatorForMaeLm(..., mask_in_encoder_fraction=...)" in caplog.records[0].getMessage()
    assert not hasattr(loaded, "mask_in_encoder_fraction")
    loaded.save_pretrained(tmp_path / "resaved")
    assert "mask_in_encoder_fraction" not in json.loads((tmp_path / "resaved" / "config.json").read_text())


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("case", ["no mask", "all masked", "all padding"])
def test_awkward_batches_give_finite_loss_and_gradients(case, attn_implementation):
    torch.manual_seed(0)
    config = tiny_mae_lm_config()
    config._attn_implementation = attn_implementation
    model = MaeLmForMaskedLM(config).train()
    batch = sample_batch()
    if case == "no mask":
        batch["input_ids"][batch["input_ids"] == MASK_TOKEN_ID] = 9
    if case == "all masked":
        batch["input_ids"][0] = MASK_TOKEN_ID
    if case == "all padding":
        batch["attention_mask"][0] = 0
    labels = torch.where(batch["input_ids"] == MASK_TOKEN_ID, 7, -100)
    loss = model(**batch, labels=labels).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_eager_and_sdpa_agree_with_padding():
    torch.manual_seed(0)
    eager_config, sdpa_config = tiny_mae_lm_config(), tiny_mae_lm_config()
    eager_config._attn_implementation, sdpa_config._attn_implementation = "eager", "sdpa"
    eager = MaeLmForMaskedLM(eager_config).eval()
    sdpa = MaeLmForMaskedLM(sdpa_config).eval()
    sdpa.load_state_dict(eager.state_dict())
    batch = sample_batch()
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        torch.testing.assert_close(eager(**batch).logits[real], sdpa(**batch).logits[real])


def test_decoder_has_no_dropout_and_encoder_shares_one_bias():
    model = MaeLmForMaskedLM(tiny_mae_lm_config())
    assert all(m.p == 0 for m in model.decoder.modules() if isinstance(m, nn.Dropout))
    attentions = [m for m in model.decoder.modules() if hasattr(m, "scaling")]
    assert attentions and all(m.dropout == 0 for m in attentions)
    biases = [name for name, _ in model.named_parameters() if "relative_attention_bias" in name]
    assert biases == ["mae_lm.relative_attention_bias.weight"]


def test_decoder_width_can_differ_through_a_projection():
    model = MaeLmForMaskedLM(
        tiny_mae_lm_config(decoder_hidden_size=16, decoder_num_attention_heads=2, decoder_intermediate_size=32)
    )
    batch = sample_batch()
    labels = torch.where(batch["input_ids"] == MASK_TOKEN_ID, 7, -100)
    assert isinstance(model.decoder.input_projection, nn.Linear)
    assert torch.isfinite(model(**batch, labels=labels).loss)


@pytest.mark.parametrize(
    "head_class", [MaeLmForSequenceClassification, MaeLmForTokenClassification, MaeLmForQuestionAnswering, MaeLmModel]
)
def test_heads_keep_the_pretrained_encoder_bit_for_bit(head_class, tmp_path):
    pretrained = MaeLmForMaskedLM(tiny_mae_lm_config())
    pretrained.save_pretrained(tmp_path)
    head = head_class.from_pretrained(tmp_path)
    encoder = head if head_class is MaeLmModel else head.mae_lm
    for name, tensor in pretrained.mae_lm.state_dict().items():
        assert torch.equal(encoder.state_dict()[name], tensor), name


def test_a_checkpoint_with_a_wrong_weight_name_is_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    MaeLmForMaskedLM(tiny_mae_lm_config()).save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    weights["mae_lm.layers.0.intermediate.weigth"] = weights.pop("mae_lm.layers.0.intermediate.weight")
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match="intermediate"):
        MaeLmForSequenceClassification.from_pretrained(tmp_path)


def test_weights_that_do_not_fit_the_config_are_refused(tmp_path):
    MaeLmForMaskedLM(tiny_mae_lm_config()).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="does not fit"):
        MaeLmForMaskedLM.from_pretrained(tmp_path, intermediate_size=48)


def test_sequence_classification_regression_and_classification_losses():
    torch.manual_seed(0)
    batch = sample_batch()
    classifier = MaeLmForSequenceClassification(tiny_mae_lm_config()).eval()
    output = classifier(**batch, labels=torch.tensor([0, 2]))
    torch.testing.assert_close(output.loss, nn.functional.cross_entropy(output.logits, torch.tensor([0, 2])))
    regressor = MaeLmForSequenceClassification(tiny_mae_lm_config(num_labels=1)).eval()
    output = regressor(**batch, labels=torch.tensor([0.5, -1.0]))
    torch.testing.assert_close(
        output.loss, nn.functional.mse_loss(output.logits.squeeze(-1), torch.tensor([0.5, -1.0]))
    )


def test_a_sequence_longer_than_the_position_table_is_refused():
    model = MaeLmForMaskedLM(tiny_mae_lm_config(max_position_embeddings=8))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(torch.full((1, 9), 5))


@pytest.mark.parametrize(
    "overrides,message",
    [
        (dict(hidden_size=30), "not divisible"),
        (dict(relative_attention_num_buckets=7), "even"),
        (dict(decoder_locality_slope=-1.0), "decoder_locality_slope must be >= 0"),
        (dict(decoder_value_init_std=0.0), "decoder_value_init_std must be > 0"),
    ],
)
def test_bad_configs_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_mae_lm_config(**overrides)


def test_decoder_locality_bias_is_minus_each_heads_slope_times_the_distance():
    """Head h adds -slope * 2**-h * min(|i - j|, relative_attention_max_distance) to every score (the positions' own,
    packed documents kept apart), padded keys blocked; with no slope the decoder is the paper's, with no positional
    bias."""
    config = tiny_mae_lm_config(
        decoder_locality_slope=0.5, decoder_num_attention_heads=2, relative_attention_max_distance=4
    )
    decoder = MaeLmForMaskedLM(config).decoder
    positions = torch.tensor([[0, 1, 2, 3, 0, 1], [0, 1, 2, 3, 4, 5]])
    documents = torch.tensor([[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0]])
    attention_mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    mask, function = decoder.locality_attention(positions, attention_mask, documents, torch.float32)
    assert function is None and mask.shape == (2, 2, 6, 6)
    lowest = torch.finfo(torch.float32).min
    for row in range(2):
        for head, slope in enumerate((0.5, 0.25)):
            for query in range(6):
                for key in range(6):
                    blocked = not attention_mask[row, key] or documents[row, query] != documents[row, key]
                    distance = min(abs(int(positions[row, query] - positions[row, key])), 4)
                    expected = lowest if blocked else -slope * distance
                    assert mask[row, head, query, key].item() == pytest.approx(expected), (row, head, query, key)
    assert MaeLmConfig().decoder_locality_slope == 0.0 and MaeLmConfig().decoder_value_init_std is None


def test_decoder_locality_bias_turns_a_masked_positions_attention_to_its_neighbours():
    """Through the model: at initialisation (scores near 0) the decoder's attention at a position falls off with the
    distance as exp(-slope * 2**-h * distance), and without the bias it is near uniform."""
    torch.manual_seed(0)
    captured = []
    for slope in (1.0, 0.0):
        model = MaeLmForMaskedLM(
            tiny_mae_lm_config(decoder_locality_slope=slope, decoder_num_attention_heads=2, initializer_range=1e-4)
        ).eval()
        model.set_attn_implementation("eager")
        layer = model.decoder.layers[0].attention
        hook = layer.register_forward_hook(lambda module, inputs, output: captured.append(output[1]))
        with torch.no_grad():
            model(torch.randint(5, 60, (1, 9)))
        hook.remove()
    local, uniform = captured
    distance = (torch.arange(9)[:, None] - torch.arange(9)[None, :]).abs()
    for head, slope in enumerate((1.0, 0.5)):
        expected = torch.softmax(-slope * distance.double(), dim=-1)
        torch.testing.assert_close(local[0, head].double(), expected, atol=1e-3, rtol=0)
    torch.testing.assert_close(uniform[0], torch.full((2, 9, 9), 1 / 9), atol=1e-3, rtol=0)


def test_decoder_value_init_std_sets_only_the_decoders_value_and_output_projections():
    torch.manual_seed(0)
    config = tiny_mae_lm_config(
        hidden_size=64, decoder_value_init_std=0.2, initializer_range=0.02, decoder_num_hidden_layers=2
    )
    model = MaeLmForMaskedLM(config)
    for layer in model.decoder.layers:
        for projection in (layer.attention.v_proj, layer.attention.o_proj):
            assert projection.weight.std().item() == pytest.approx(0.2, rel=0.1)
            assert projection.bias.abs().max() == 0
        for projection in (layer.attention.q_proj, layer.attention.k_proj, layer.intermediate):
            assert projection.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert model.mae_lm.layers[0].attention.v_proj.weight.std().item() == pytest.approx(0.02, rel=0.1)


def test_the_decoder_options_survive_a_save_and_load(tmp_path):
    """Both fields in config.json, the saved weights loaded as they are (not drawn again at the larger std), and the
    same loss after loading."""
    torch.manual_seed(0)
    model = MaeLmForMaskedLM(tiny_mae_lm_config(decoder_locality_slope=1.0, decoder_value_init_std=0.2)).eval()
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["decoder_locality_slope"] == 1.0 and saved["decoder_value_init_std"] == 0.2
    loaded = MaeLmForMaskedLM.from_pretrained(tmp_path).eval()
    assert loaded.config.decoder_locality_slope == 1.0 and loaded.config.decoder_value_init_std == 0.2
    torch.testing.assert_close(
        loaded.decoder.layers[0].attention.v_proj.weight, model.decoder.layers[0].attention.v_proj.weight
    )
    batch = sample_batch()
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).loss, model(**batch).loss)


SENTENCES = [
    "The encoder reads the kept tokens and the decoder predicts the masked ones.",
    "A shallow decoder keeps the encoder honest about what it represents.",
    "Masked language models replace some tokens with a special mask symbol.",
] * 20


@pytest.fixture(scope="module")
def tokenizer():
    from hf_encoders.data.tokenizer import train_wordpiece_tokenizer

    return train_wordpiece_tokenizer(SENTENCES, vocab_size=200)


def test_collator_masks_fifteen_percent_all_as_mask_and_never_special_tokens(tokenizer):
    from hf_encoders import DataCollatorForMaeLm

    collator = DataCollatorForMaeLm(tokenizer, pad_to_multiple_of=8, seed=0)
    examples = [tokenizer(sentence) for sentence in SENTENCES]
    batch = collator(examples)
    assert batch["input_ids"].shape[1] % 8 == 0
    selected = batch["labels"] != -100
    assert torch.equal(batch["input_ids"][selected], torch.full((int(selected.sum()),), tokenizer.mask_token_id))
    specials = torch.isin(batch["labels"], torch.tensor(tokenizer.all_special_ids))
    assert not specials.any(), "special tokens and padding are never selected"
    real = torch.tensor(
        [
            [token not in tokenizer.all_special_ids for token in ids]
            for ids in batch["input_ids"].masked_fill(selected, 5).tolist()
        ]
    )
    assert 0.10 < selected.sum() / real.sum() < 0.20


def test_collator_refuses_a_tokenizer_without_mask_token(tokenizer):
    from hf_encoders import DataCollatorForMaeLm

    stripped = tokenizer.train_new_from_iterator(SENTENCES, vocab_size=200)
    stripped.mask_token = None
    with pytest.raises(ValueError, match="has no mask token"):
        DataCollatorForMaeLm(stripped)


def test_fill_mask_pipeline_returns_predictions(tokenizer):
    from transformers import pipeline

    model = MaeLmForMaskedLM(
        tiny_mae_lm_config(
            vocab_size=len(tokenizer), mask_token_id=tokenizer.mask_token_id, pad_token_id=tokenizer.pad_token_id
        )
    ).eval()
    text = "the encoder reads the [MASK] tokens"
    predictions = pipeline("fill-mask", model=model, tokenizer=tokenizer, top_k=3)(text)
    assert len(predictions) == 3 and all(isinstance(p["token_str"], str) and 0 <= p["score"] <= 1 for p in predictions)
    assert predictions[0]["score"] >= predictions[1]["score"] >= predictions[2]["score"]
    # What the pipeline reports is the model's own distribution at [MASK] (the ordering above is the pipeline's).
    inputs = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits[inputs["input_ids"] == tokenizer.mask_token_id][0]
    probabilities, ids = logits.softmax(-1).topk(3)
    assert [p["token"] for p in predictions] == ids.tolist()
    assert [p["score"] for p in predictions] == pytest.approx(probabilities.tolist())

"""Whole-word and span masking for every method: word boundaries through packing, each unit kept whole, the ratio met
in tokens, the replacement chosen per unit, no unit across a special token or a document start, bad input refused."""

import pytest
import torch
from datasets import Dataset
from scipy.stats import geom
from transformers import DataCollatorForLanguageModeling

from hf_encoders import DataCollatorForBiphasic, DataCollatorForMaeLm, DataCollatorForTacl
from hf_encoders.data import embedded_documents, pack_bert_style, pack_llama_style, tokenize_documents
from hf_encoders.data.masking_units import (
    choose_exact,
    exact_counts,
    exact_whole_words,
    span_length_distribution,
    spans,
    unit_index,
    word_start_mask,
)
from hf_encoders.data.reproducible_masking import ReproducibleDataCollatorForLanguageModeling, batch_seed
from hf_encoders.methods.tacl.sentence_pairs import build_sentence_pairs
from tests.tiny_models import corpus_tokenizer

COLLATORS = {
    "mlm": ReproducibleDataCollatorForLanguageModeling,
    "mae_lm": DataCollatorForMaeLm,
    "tacl": DataCollatorForTacl,
    "biphasic": lambda tokenizer, **options: DataCollatorForBiphasic(tokenizer, objective="mlm", **options),
}
# Methods whose papers replace every selected token by [MASK]; the others use BERT's 80/10/10.
ALL_MASK = {"mae_lm", "biphasic"}


@pytest.fixture(scope="module")
def tokenizer():
    return corpus_tokenizer()


@pytest.fixture(scope="module")
def blocks(tokenizer):
    """Packed 64-token blocks of the embedded corpus, one document per position run, with word starts."""
    documents = Dataset.from_dict({"text": embedded_documents()[:40]})
    tokenized = tokenize_documents(documents, tokenizer, word_starts=True)
    ids = dict(cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id)
    return pack_bert_style(tokenized, 64, **ids, pack_documents=True)


def wordpiece_starts(tokenizer, ids) -> torch.Tensor:
    """An independent reading of word starts, for WordPiece only: every token but a "##" continuation."""
    return torch.tensor([not token.startswith("##") for token in tokenizer.convert_ids_to_tokens(ids)])


def masked_batches(collator, blocks, count: int, batch_size: int = 8):
    for start in range(0, count * batch_size, batch_size):
        yield collator([blocks[i] for i in range(start, start + batch_size)])


def test_word_start_mask_reads_word_ids_and_sequence_ids():
    word_ids = [None, 0, 0, 1, None, 0, 0, None]
    assert word_start_mask(word_ids) == [1, 1, 0, 1, 1, 1, 0, 1]
    # A pair's second text counts its words from 0 again: its first word still starts one.
    assert word_start_mask([None, 0, 0, None, 0, None], [None, 0, 0, None, 1, None]) == [1, 1, 0, 1, 1, 1]


@pytest.mark.parametrize("pack_documents", [False, True])
@pytest.mark.parametrize("style", ["bert", "llama"])
def test_packing_carries_word_starts_aligned_with_the_tokens(tokenizer, style, pack_documents):
    documents = Dataset.from_dict({"text": embedded_documents()[:6]})
    tokenized = tokenize_documents(documents, tokenizer, word_starts=True)
    if style == "bert":
        ids = dict(cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id, separator_id=tokenizer.sep_token_id)
        packed = pack_bert_style(tokenized, 48, **ids, pack_documents=pack_documents)
    else:
        packed = pack_llama_style(tokenized, 48, eos_id=tokenizer.sep_token_id, pack_documents=pack_documents)
    assert len(packed) > 10
    for block in packed:
        assert torch.equal(torch.tensor(block["word_starts"]).bool(), wordpiece_starts(tokenizer, block["input_ids"]))


def test_streamed_packing_carries_the_same_word_starts(tokenizer):
    documents = Dataset.from_dict({"text": embedded_documents()[:6]})
    ids = dict(cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id, separator_id=tokenizer.sep_token_id)
    packed = pack_bert_style(tokenize_documents(documents, tokenizer, word_starts=True), 48, **ids)
    streamed = pack_bert_style(
        tokenize_documents(documents.to_iterable_dataset(), tokenizer, word_starts=True), 48, **ids
    )
    assert [row["word_starts"] for row in streamed] == packed["word_starts"]


def test_sentence_pairs_carry_word_starts(tokenizer):
    sentences = [["the cat sat on the mat.", "a dog barked loudly."], ["python interpreters evaluate bytecode."]] * 3
    pairs = build_sentence_pairs(sentences, tokenizer, max_length=32, word_starts=True)
    for pair in pairs:
        assert torch.equal(torch.tensor(pair["word_starts"]).bool(), wordpiece_starts(tokenizer, pair["input_ids"]))


@pytest.mark.parametrize("masking", ["whole_word", "span"])
@pytest.mark.parametrize("method", list(COLLATORS))
def test_every_method_masks_whole_units_at_its_ratio(method, masking, tokenizer, blocks):
    collator = COLLATORS[method](tokenizer, masking=masking, seed=0)
    special = torch.tensor(tokenizer.all_special_ids)
    masked_tokens = maskable_tokens = masked_units = units_all_mask = squared_word_sizes = 0
    for batch in masked_batches(collator, blocks, count=60):
        labelled = batch["labels"] != -100
        originals = torch.where(labelled, batch["labels"], batch["input_ids"])
        maskable = ~torch.isin(originals, special)
        assert not (labelled & ~maskable).any(), "a special token was masked"
        for row, ids in enumerate(originals):
            starts = wordpiece_starts(tokenizer, ids.tolist())
            words = unit_index(starts[None])[0]
            # Every word is labelled whole or not at all (a span's last word may be cut where the count is reached).
            per_word = torch.zeros(len(ids), dtype=torch.long).index_add(0, words, labelled[row].long())
            sizes = torch.zeros(len(ids), dtype=torch.long).index_add(0, words, torch.ones_like(words))
            squared_word_sizes += int((sizes[starts & maskable[row]] ** 2).sum())
            partial = (per_word > 0) & (per_word < sizes)
            assert partial.sum() <= (1 if masking == "span" else 0)
            # One replacement per unit: within a masked word, [MASK] everywhere or nowhere. A random replacement can
            # draw [MASK] itself, so words with a random token (neither [MASK] nor the original) are left out.
            inputs = batch["input_ids"][row]
            is_mask = inputs == tokenizer.mask_token_id
            randomised = labelled[row] & ~is_mask & (inputs != ids)
            whole = labelled[row] & ~partial[words]
            mask_per_word = torch.zeros(len(ids), dtype=torch.long).index_add(0, words, (is_mask & whole).long())
            labelled_per_word = torch.zeros(len(ids), dtype=torch.long).index_add(0, words, whole.long())
            random_per_word = torch.zeros(len(ids), dtype=torch.long).index_add(0, words, randomised.long())
            chosen = labelled_per_word > 0
            checked = chosen & (random_per_word == 0)
            assert torch.all((mask_per_word[checked] == 0) | (mask_per_word[checked] == labelled_per_word[checked]))
            masked_units += int(chosen.sum())
            units_all_mask += int((mask_per_word[chosen] > 0).sum())
        masked_tokens += int(labelled.sum())
        maskable_tokens += int(maskable.sum())
    # Whole words are Bernoulli(ratio) draws weighted by their sizes: the ratio's standard error is
    # sqrt(ratio (1 - ratio) sum(size^2)) / tokens (~0.003 here); within 4 of them. Spans meet it row by row.
    ratio = collator.mlm_probability
    standard_error = (ratio * (1 - ratio) * squared_word_sizes) ** 0.5 / maskable_tokens
    assert masked_tokens / maskable_tokens == pytest.approx(ratio, abs=4 * standard_error)
    if method in ALL_MASK:
        assert units_all_mask == masked_units
    else:  # 80% of the words (not tokens) get [MASK]: some hundreds of words, so within a few points
        assert units_all_mask / masked_units == pytest.approx(0.8, abs=0.05)


def test_mae_lm_removes_every_masked_sub_token_from_its_encoder(tokenizer, blocks):
    from hf_encoders import MaeLmForMaskedLM
    from tests.tiny_models import tiny_mae_lm_config

    model = MaeLmForMaskedLM(tiny_mae_lm_config(vocab_size=len(tokenizer), mask_token_id=tokenizer.mask_token_id))
    for masking in ("whole_word", "span"):
        batch = next(masked_batches(DataCollatorForMaeLm(tokenizer, masking=masking, seed=1), blocks, count=1))
        keep = model.encoder_input_mask(batch["input_ids"], batch["attention_mask"])
        assert torch.equal(keep, batch["labels"] == -100)


@pytest.mark.parametrize("masking", ["token", "whole_word", "span"])
def test_mae_lm_delta_keeps_whole_units_in_the_encoder(masking, tokenizer, blocks):
    from hf_encoders import MaeLmForMaskedLM
    from tests.tiny_models import tiny_mae_lm_config

    examples = [blocks[i] for i in range(8, 40)]
    plain = DataCollatorForMaeLm(tokenizer, masking=masking, seed=2)(examples)
    assert "masks_in_encoder" not in plain  # δ = 0: the model keeps no [MASK] without the column
    batch = DataCollatorForMaeLm(tokenizer, masking=masking, seed=2, mask_in_encoder_fraction=0.5)(examples)
    assert torch.equal(batch["labels"], plain["labels"]) and torch.equal(batch["input_ids"], plain["input_ids"])
    masked, stays = batch["labels"] != -100, batch["masks_in_encoder"]
    assert not (stays & ~masked).any()
    # δ is drawn per unit; spans (about 60 here, of 1-10 words) make the token share vary more than words do, and the
    # tokenizer (trained on the spot, tokenizers#1794) changes the batch from process to process.
    low, high = (0.2, 0.8) if masking == "span" else (0.35, 0.65)
    assert low < stays.sum() / masked.sum() < high
    if masking == "whole_word":  # each word stays whole or goes whole (spans: the same, but spans are not visible)
        for row, ids in enumerate(batch["labels"].where(masked, batch["input_ids"])):
            words = unit_index(wordpiece_starts(tokenizer, ids.tolist())[None])[0]
            kept = torch.zeros(len(ids), dtype=torch.long).index_add(0, words, stays[row].long())
            labelled = torch.zeros(len(ids), dtype=torch.long).index_add(0, words, masked[row].long())
            assert torch.all((kept == 0) | (kept == labelled))
    model = MaeLmForMaskedLM(tiny_mae_lm_config(vocab_size=len(tokenizer), mask_token_id=tokenizer.mask_token_id))
    keep = model.encoder_input_mask(batch["input_ids"], batch["attention_mask"], batch["masks_in_encoder"])
    assert torch.equal(keep, ~masked | stays)
    assert torch.equal(model.encoder_input_mask(batch["input_ids"], batch["attention_mask"]), ~masked)


@pytest.mark.parametrize("masking", ["token", "span"])
def test_mae_lm_delta_is_a_function_of_seed_epoch_and_batch(masking, tokenizer, blocks):
    """As the masks are (data/reproducible_masking.py): the same batch keeps the same [MASK]s however often it is
    collated, whatever the global RNG did in between; another epoch or seed chooses others."""
    examples = [blocks[i] for i in range(8, 24)]
    collator = DataCollatorForMaeLm(tokenizer, masking=masking, seed=3, mask_in_encoder_fraction=0.5)
    first = collator(examples)["masks_in_encoder"]
    torch.manual_seed(0)
    again = DataCollatorForMaeLm(tokenizer, masking=masking, seed=3, mask_in_encoder_fraction=0.5)(examples)
    assert torch.equal(again["masks_in_encoder"], first) and torch.equal(collator(examples)["masks_in_encoder"], first)
    collator.epoch = 1
    assert not torch.equal(collator(examples)["masks_in_encoder"], first)
    reseeded = DataCollatorForMaeLm(tokenizer, masking=masking, seed=4, mask_in_encoder_fraction=0.5)(examples)
    assert not torch.equal(reseeded["masks_in_encoder"], first)


@pytest.mark.parametrize("delta", [-0.1, 1.5])
def test_a_delta_outside_zero_one_is_refused(delta, tokenizer):
    with pytest.raises(ValueError, match=r"mask_in_encoder_fraction \(δ\) must lie in \[0, 1\], got"):
        DataCollatorForMaeLm(tokenizer, mask_in_encoder_fraction=delta)


def count_rule(seed: int, originals: torch.Tensor, maskable: torch.Tensor, ratio: float) -> torch.Tensor:
    """floor(ratio x maskable + u), u the first draw of the batch's generator: the rule, computed apart from the
    collator."""
    generator = torch.Generator().manual_seed(batch_seed(seed, 0, originals))
    u = torch.rand(len(originals), generator=generator, dtype=torch.float64)
    return torch.floor(ratio * maskable.sum(1).double() + u).long()


@pytest.mark.parametrize("masking", ["token", "whole_word", "span"])
@pytest.mark.parametrize("method", list(COLLATORS))
def test_every_method_masks_an_exact_count_per_row(method, masking, tokenizer, blocks):
    collator = COLLATORS[method](tokenizer, masking=masking, seed=5)
    special = torch.tensor(tokenizer.all_special_ids)
    counts, maskables, short_rows = [], [], 0
    for batch in masked_batches(collator, blocks, count=20):
        labelled = batch["labels"] != -100
        originals = torch.where(labelled, batch["labels"], batch["input_ids"])
        maskable = ~torch.isin(originals, special)
        expected = count_rule(5, originals, maskable, collator.mlm_probability)
        if masking == "whole_word":  # BERT's rule skips words too long for what is left: never more
            assert torch.all(labelled.sum(1) <= expected)
            short_rows += int((labelled.sum(1) < expected).sum())
        else:
            assert torch.equal(labelled.sum(1), expected)
        counts.append(labelled.sum(1))
        maskables.append(maskable.sum(1))
    counts, maskables = torch.cat(counts).double(), torch.cat(maskables).double()
    assert short_rows <= len(counts) // 20
    # floor(x + u) - x has mean 0 and spread at most 1/sqrt(12) per row: the rate is exact over many rows.
    error = (counts - collator.mlm_probability * maskables).mean()
    assert abs(error) < 4 / 12**0.5 / len(counts) ** 0.5 + short_rows / len(counts)


def test_per_token_counts_vary_as_transformers_coins_do(tokenizer, blocks):
    """mask_count='per_token' is the stock collator's masking: the same masks, from the same generator."""
    ours = ReproducibleDataCollatorForLanguageModeling(tokenizer, mask_count="per_token", seed=2)
    examples = [{"input_ids": blocks[i]["input_ids"]} for i in range(8)]
    batch = ours(examples)
    stock = DataCollatorForLanguageModeling(tokenizer, seed=0)
    stock.generator = torch.Generator().manual_seed(batch_seed(2, 0, batch_inputs(tokenizer, examples)))
    expected = stock.torch_mask_tokens(batch_inputs(tokenizer, examples))
    assert torch.equal(batch["labels"], expected[1]) and torch.equal(batch["input_ids"], expected[0])


def batch_inputs(tokenizer, examples) -> torch.Tensor:
    return tokenizer.pad(examples, return_tensors="pt", pad_to_multiple_of=None)["input_ids"]


def test_exact_counts_round_to_the_rate_in_expectation():
    candidates = torch.full((4000,), 10)
    counts = exact_counts(candidates, 0.15, torch.Generator().manual_seed(0))
    assert set(counts.tolist()) == {1, 2}
    assert counts.double().mean() == pytest.approx(1.5, abs=0.03)
    chosen = choose_exact(torch.ones(4000, 10, dtype=torch.bool), 0.15, torch.Generator().manual_seed(0))
    assert torch.equal(chosen.sum(1), counts)  # the same first draw: the same counts
    # Uniform over the candidates: each position chosen 15% of the time, and never a non-candidate.
    assert chosen.double().mean(0) == pytest.approx(torch.full((10,), 0.15, dtype=torch.float64), abs=0.025)
    some = torch.arange(10).expand(4000, -1) % 2 == 0
    assert not (choose_exact(some, 0.5, torch.Generator().manual_seed(1)) & ~some).any()


def test_exact_whole_words_take_words_whole_and_meet_the_count_when_words_fit():
    # Rows of two-token words and one-token words: 20 maskable tokens, a count of 3 at 15%.
    starts = torch.tensor([[1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    starts, maskable = starts.expand(500, -1), torch.ones(500, 20, dtype=torch.bool)
    masked = exact_whole_words(starts, maskable, 0.15, torch.Generator().manual_seed(0))
    assert torch.equal(masked.sum(1), torch.full((500,), 3))
    pairs = masked[:, :10].view(500, 5, 2)
    assert torch.equal(pairs[..., 0], pairs[..., 1])  # a two-token word is masked whole or not at all
    assert pairs.any() and masked[:, 10:].any()
    # Only two-token words and an odd count: one short, never over, never a word cut.
    odd = exact_whole_words(starts[:, :10], maskable[:, :10], 0.3, torch.Generator().manual_seed(0))
    assert torch.equal(odd.sum(1), torch.full((500,), 2))


def test_spans_follow_spanberts_length_distribution_and_never_cross_a_document_start():
    # SpanBERT's Geo(0.2) truncated at 10 words and renormalised: mean 3.8 words, as the paper reports.
    expected = torch.tensor(geom.pmf(range(1, 11), 0.2) / geom.cdf(10, 0.2))
    assert torch.allclose(span_length_distribution(0.2, 10), expected)
    assert float((torch.arange(1, 11) * expected).sum()) == pytest.approx(3.8, abs=0.01)
    # Rows of one-token words and documents of 7 tokens, with no special token between them: only position_ids tell.
    length, generator = 70, torch.Generator().manual_seed(0)
    position_ids = (torch.arange(length) % 7)[None].expand(16, -1)
    starts, maskable = torch.ones(16, length, dtype=torch.bool), torch.ones(16, length, dtype=torch.bool)
    documents = (position_ids == 0).cumsum(1)
    for _ in range(30):
        masked, span_starts = spans(starts, maskable, 0.4, generator, position_ids=position_ids)
        assert torch.equal(masked.sum(1), torch.full((16,), 28))  # 40% of 70, exactly: no fraction to round
        first = unit_index(span_starts)
        assert torch.equal(documents.gather(1, first)[masked], documents[masked])
        assert span_starts[masked].any() and not (span_starts & ~masked).any()


def test_span_ratio_is_exact_in_expectation_when_it_falls_between_tokens():
    starts, maskable = torch.ones(4000, 10, dtype=torch.bool), torch.ones(4000, 10, dtype=torch.bool)
    masked, _ = spans(starts, maskable, 0.15, torch.Generator().manual_seed(0))
    counts = masked.sum(1)
    assert set(counts.tolist()) == {1, 2}  # 1.5 tokens: one or two
    assert counts.double().mean() == pytest.approx(1.5, abs=0.03)


@pytest.mark.parametrize("masking", ["token", "whole_word", "span"])
def test_masks_are_a_function_of_seed_epoch_and_batch(masking, tokenizer, blocks):
    examples = [blocks[i] for i in range(8)]
    first = DataCollatorForTacl(tokenizer, masking=masking, seed=3)(examples)
    again = DataCollatorForTacl(tokenizer, masking=masking, seed=3)
    again(list(reversed(examples)))  # another batch in between changes nothing
    assert torch.equal(again(examples)["input_ids"], first["input_ids"])
    again.epoch = 1
    assert not torch.equal(again(examples)["labels"], first["labels"])


def test_transformers_whole_word_mask_flag_reads_offsets_and_means_whole_word(tokenizer):
    texts = [" ".join(document.split()[:30]) for document in embedded_documents()[:16]]
    # transformers pads no offsets, so its whole_word_mask=True needs features of one length.
    encoded = tokenizer(
        texts,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        padding="max_length",
        max_length=64,
        truncation=True,
    )
    features = [{key: encoded[key][i] for key in encoded} for i in range(len(texts))]
    flagged = DataCollatorForMaeLm(tokenizer, whole_word_mask=True, seed=0)
    assert flagged.masking == "whole_word"
    labelled = flagged(features)["labels"] != -100
    assert labelled.any()
    # transformers' words are what whitespace separates (offsets that touch continue a word): each masked whole.
    for row, (text, offsets) in enumerate(zip(texts, encoded["offset_mapping"])):
        special = torch.tensor(encoded["special_tokens_mask"][row]).bool()
        starts = torch.tensor([start == 0 or text[start - 1] == " " for start, _ in offsets]) | special
        words = unit_index(starts[None])[0]
        per_word = torch.zeros(64, dtype=torch.long).index_add(0, words, labelled[row].long())
        sizes = torch.zeros(64, dtype=torch.long).index_add(0, words, torch.ones_like(words))
        assert not ((per_word > 0) & (per_word < sizes)).any()


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(whole_word_mask=True, masking="span"), "whole_word_mask=True asks for whole words"),
        (dict(whole_word_mask=True, masking="token"), "whole_word_mask=True asks for whole words"),
        (dict(masking="words"), "Unknown masking 'words'; choose one of token, whole_word, span"),
        (dict(masking="span", max_span_length=0), "max_span_length must be at least 1"),
        (dict(masking="span", span_geometric_p=0.0), "span_geometric_p must lie in"),
    ],
)
@pytest.mark.parametrize("method", list(COLLATORS))
def test_bad_masking_options_are_refused(method, options, message, tokenizer):
    with pytest.raises(ValueError, match=message):
        COLLATORS[method](tokenizer, **options)


@pytest.mark.parametrize("masking", ["whole_word", "span"])
def test_word_units_refuse_a_slow_tokenizer_and_features_without_boundaries(masking, tokenizer):
    from transformers import PerceiverTokenizer

    with pytest.raises(ValueError, match=r"slow tokenizer.*AutoTokenizer.from_pretrained"):
        DataCollatorForMaeLm(PerceiverTokenizer(), masking=masking)
    with pytest.raises(ValueError, match="needs word boundaries in the features: a `word_starts` column"):
        DataCollatorForMaeLm(tokenizer, masking=masking)([{"input_ids": [2, 10, 11, 3]}])


def test_pretrain_names_an_unknown_masking_unit_and_a_span_cap_below_one(tmp_path, capsys):
    from hf_encoders.training.pretrain import main

    argv = ["--method", "mae_lm", "--output_dir", str(tmp_path), "--report_to", "none", "--max_documents", "10"]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--masking", "words"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]  # argparse quotes the choices on some Python versions only
    assert "argument --masking: invalid choice: 'words' (choose from" in error and "whole_word" in error
    with pytest.raises(ValueError, match="max_span_length must be at least 1 word, got 0"):
        main([*argv, "--masking", "span", "--max_span_length", "0", "--use_cpu"])


def test_the_recipe_hands_the_unit_to_the_collator_and_the_card(tokenizer):
    from hf_encoders.training.arguments import PretrainArguments
    from hf_encoders.training.recipe import get_recipe

    recipe = get_recipe("mae_lm")
    span = PretrainArguments(
        method="mae_lm", masking="span", max_span_length=4, span_geometric_p=0.5, mask_in_encoder_fraction=0.3
    )
    collator = recipe.build_collator(span, tokenizer)
    assert (collator.masking, collator.max_span_length, collator.span_geometric_p) == ("span", 4, 0.5)
    assert collator.mask_in_encoder_fraction == 0.3  # δ per span, from --mask_in_encoder_fraction
    assert recipe.build_collator(PretrainArguments(method="mae_lm"), tokenizer).mask_in_encoder_fraction == 0
    assert "- [MASK]s kept in the encoder input (δ): 30%" in recipe.summary_lines(span)
    assert "- masking unit: spans of Geometric(0.5) words, at most 4" in recipe.summary_lines(span)

"""Training a WordPiece tokenizer on the spot, saving and reloading it, and loading by name."""

import huggingface_hub.constants
import pytest
from transformers import AutoTokenizer, BertTokenizer

from hf_encoders.data import (
    TokenizerLoadError,
    embedded_documents,
    load_or_train_tokenizer,
    train_wordpiece_tokenizer,
)

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Héllo, Wörld! Tokenizers split words into pieces."]
PAIR = ("Where is the if statement?", "It selects exactly one of the suites.")


def encodings(tokenizer):
    """Ids, token types, attention masks and offsets of a batch of single texts and of a pair."""
    return {
        "batch": dict(tokenizer(TEXTS, return_offsets_mapping=True)),
        "pair": dict(tokenizer(*PAIR, return_offsets_mapping=True)),
    }


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece_tokenizer(embedded_documents()[:30], vocab_size=1000)


def test_special_tokens_come_first_in_bert_order(tokenizer):
    assert [tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.cls_token_id] == [0, 1, 2]
    assert [tokenizer.sep_token_id, tokenizer.mask_token_id] == [3, 4]
    assert tokenizer.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_is_a_fast_bert_tokenizer_of_the_requested_size(tokenizer):
    assert isinstance(tokenizer, BertTokenizer) and tokenizer.is_fast
    assert len(tokenizer) == 1000 and tokenizer.model_max_length == 512


def test_single_and_pair_templates(tokenizer):
    single = tokenizer("the if statement")
    assert single["input_ids"][0] == tokenizer.cls_token_id and single["input_ids"][-1] == tokenizer.sep_token_id
    pair = tokenizer(*PAIR)
    first_length = len(tokenizer(PAIR[0])["input_ids"])
    assert pair["token_type_ids"] == [0] * first_length + [1] * (len(pair["input_ids"]) - first_length)
    assert pair["input_ids"][first_length - 1] == pair["input_ids"][-1] == tokenizer.sep_token_id


def test_lowercases_strips_accents_and_decodes(tokenizer):
    ids = tokenizer("The IF Statement, Déjà vu")["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "the if statement, deja vu"


def test_offsets_point_into_the_original_text(tokenizer):
    text = "Assert statements insert debugging assertions."
    encoding = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    pieces = [text[start:end].lower() for start, end in encoding["offset_mapping"]]
    tokens = [token.removeprefix("##") for token in tokenizer.convert_ids_to_tokens(encoding["input_ids"])]
    assert pieces == tokens


def test_save_and_reload_gives_identical_ids_and_offsets(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(reloaded) is type(tokenizer) and reloaded.is_fast
    assert reloaded.get_vocab() == tokenizer.get_vocab()
    assert reloaded.model_max_length == tokenizer.model_max_length
    assert encodings(reloaded) == encodings(tokenizer)


def test_cased_tokenizer_keeps_case_after_reload(tmp_path):
    cased = train_wordpiece_tokenizer(embedded_documents()[:5], vocab_size=300, lowercase=False, model_max_length=128)
    cased.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert reloaded.model_max_length == 128
    assert reloaded.decode(reloaded("The If")["input_ids"], skip_special_tokens=True) == "The If"


def test_training_without_text_fails():
    with pytest.raises(ValueError, match="no text"):
        train_wordpiece_tokenizer([], vocab_size=100)


def test_load_or_train_trains_without_a_name():
    trained = load_or_train_tokenizer(None, TEXTS, vocab_size=120)
    assert isinstance(trained, BertTokenizer) and trained.mask_token_id == 4


def test_load_or_train_loads_a_saved_folder(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    loaded = load_or_train_tokenizer(str(tmp_path), texts=[])
    assert loaded.get_vocab() == tokenizer.get_vocab()


def test_load_or_train_rejects_a_folder_without_tokenizer_files(tmp_path):
    with pytest.raises(TokenizerLoadError, match="not a folder written by save_pretrained"):
        load_or_train_tokenizer(str(tmp_path), texts=[])


def test_load_or_train_explains_an_unreachable_hub_name(monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(TokenizerLoadError) as raised:
        load_or_train_tokenizer("someone/some-tokenizer", texts=[])
    message = str(raised.value)
    assert "'someone/some-tokenizer'" in message and "HF_HUB_OFFLINE is set" in message
    assert "None to train" in message
    assert issubclass(TokenizerLoadError, ValueError)

"""The token cache: `hf-encoders tokenize` writes a run's blocks once; `pretrain --tokenized_dir` trains from them as
it would from the corpus, and refuses a cache made with another tokenizer, block size or packing, saying what differs."""

import json

import pytest
from transformers import AutoTokenizer

from hf_encoders.data.corpus_report import CorpusReport
from hf_encoders.data.mixtures import load_corpus
from hf_encoders.data.token_cache import FINGERPRINT_FILE, load_cache, tokenizer_hash
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.recipe import get_recipe
from hf_encoders_cli import main
from tests.tiny_models import corpus_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_tokenizer_hash_follows_what_turns_text_into_ids(bert, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(bert)
    tokenizer.save_pretrained(tmp_path / "copy")
    copy = AutoTokenizer.from_pretrained(tmp_path / "copy")
    copy.model_max_length = 7  # a setting, not what ids the text gets
    assert tokenizer_hash(copy) == tokenizer_hash(tokenizer)
    assert tokenizer_hash(corpus_tokenizer(vocab_size=250)) != tokenizer_hash(tokenizer)
    tokenizer.add_tokens(["newword"])
    assert tokenizer_hash(tokenizer) != tokenizer_hash(copy)


@pytest.fixture(scope="module")
def corpus_with_a_bad_row(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "extra.jsonl"
    rows = [json.dumps({"text": f"Extra document {i} is about caches and mixtures."}) for i in range(20)]
    path.write_text("\n".join([*rows[:5], '{"text": 3}', *rows[5:]]) + "\n", encoding="utf-8")
    return f"embedded:0.75,{path}:0.25"


def tokenize_argv(bert, corpus, output_dir, *extra):
    return [
        "tokenize",
        "--method",
        "mae_lm",
        "--corpus",
        corpus,
        "--skip_bad_rows",
        "--max_documents",
        "60",
        "--tokenizer_name",
        bert,
        "--block_size",
        "32",
        "--masking",
        "whole_word",
        "--output_dir",
        str(output_dir),
        *extra,
    ]


@pytest.fixture(scope="module")
def cache(bert, corpus_with_a_bad_row, tmp_path_factory):
    folder = tmp_path_factory.mktemp("caches") / "mae_lm-32"
    assert main(tokenize_argv(bert, corpus_with_a_bad_row, folder)) == 0
    return folder


def test_the_cache_holds_the_blocks_pretrain_would_make(cache, bert, corpus_with_a_bad_row):
    args = PretrainArguments(
        method="mae_lm", corpus=corpus_with_a_bad_row, tokenizer_name=bert, block_size=32, masking="whole_word"
    )
    report = CorpusReport.for_corpus(args.corpus)
    corpus = load_corpus(report.shares, 42, skip_bad_rows=True, skipped=report.skipped)
    report.available, report.documents = len(corpus), 60  # the cache also records how many documents it read
    documents = corpus.take(60)
    recipe = get_recipe("mae_lm")
    expected = recipe.build_dataset(args, AutoTokenizer.from_pretrained(bert), documents)
    recorded = json.loads((cache / FINGERPRINT_FILE).read_text())
    blocks, cached_report = load_cache(
        cache, {key: recorded[key] for key in ("tokenizer", "block_size", "packing", "word_starts")}
    )
    assert blocks.column_names == expected.column_names and "word_starts" in blocks.column_names
    assert blocks.to_dict() == expected.to_dict()
    assert recorded["block_size"] == 32 and recorded["word_starts"] and recorded["blocks"] == len(expected)
    assert cached_report.to_dict() == report.to_dict() and len(cached_report.skipped) == 1


def test_a_streamed_corpus_makes_the_same_cache(cache, bert, corpus_with_a_bad_row, tmp_path):
    assert main(tokenize_argv(bert, corpus_with_a_bad_row, tmp_path / "streamed", "--streaming")) == 0
    recorded = json.loads((cache / FINGERPRINT_FILE).read_text())
    expected = {key: recorded[key] for key in ("tokenizer", "block_size", "packing", "word_starts")}
    streamed, _ = load_cache(tmp_path / "streamed", expected)
    assert streamed.to_dict() == load_cache(cache, expected)[0].to_dict()
    assert not list(tmp_path.glob(".*building"))  # the stream's intermediate copy is removed


def test_tokenize_refuses_a_folder_holding_a_cache(cache, bert, corpus_with_a_bad_row):
    with pytest.raises(SystemExit):
        main(tokenize_argv(bert, corpus_with_a_bad_row, cache))


def pretrain_argv(output_dir, *extra, method="mae_lm"):
    return [
        "pretrain",
        "--method",
        method,
        "--output_dir",
        str(output_dir),
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "4",
        "--logging_steps",
        "1",
        "--save_strategy",
        "no",
        "--report_to",
        "none",
        "--use_cpu",
        *extra,
    ]


@pytest.mark.parametrize(
    "method,extra,difference",
    [
        ("mae_lm", ["--block_size", "64", "--masking", "whole_word"], "block size 32 where this run has 64"),
        # mlm packs as mae_lm does; token masking needs no word boundaries; no --block_size takes the cache's (32)
        ("mlm", [], None),
        ("mae_lm", ["--block_size", "32", "--tokenizer_name", "OTHER"], r"tokenizer \(content hash\) '\w+' where"),
    ],
)
def test_pretrain_refuses_a_cache_made_otherwise_saying_what_differs(cache, tmp_path, method, extra, difference):
    corpus_tokenizer(vocab_size=250).save_pretrained(tmp_path / "other")
    extra = [str(tmp_path / "other") if argument == "OTHER" else argument for argument in extra]
    argv = pretrain_argv(tmp_path / "out", "--tokenized_dir", str(cache), *extra, method=method)
    if difference is None:
        assert main(argv) == 0
        card = (tmp_path / "out" / "README.md").read_text()
        assert "- source embedded: weight 0.75 (75.0%), realised" in card
        assert "- bad rows skipped (--skip_bad_rows): 1, the first: " in card and "extra.jsonl:6: field 'text'" in card
    else:
        with pytest.raises(ValueError, match=rf"--tokenized_dir {cache} was made with .*{difference}"):
            main(argv)


@pytest.mark.parametrize("method", ["biphasic", "tacl"])
def test_a_cache_made_for_other_methods_is_refused_for_that_first(cache, bert, tmp_path, method):
    """Not for its tokenizer's hash, which differs too (biphasic's adds BOS and EOS) only because the method does."""
    start = ["--model_name_or_path", bert] if method == "tacl" else []
    argv = pretrain_argv(tmp_path / "out", "--tokenized_dir", str(cache), *start, method=method)
    with pytest.raises(
        ValueError,
        match=rf"^--tokenized_dir {cache} holds BERT-style blocks .*, made for --method "
        rf"mlm or mae_lm; --method {method} trains on .* run hf-encoders tokenize --method {method}\.$",
    ):
        main(argv)


def test_a_run_from_its_own_new_cache_trains_as_a_run_from_the_corpus(bert, tmp_path):
    corpus_options = ["--max_documents", "40", "--tokenizer_name", bert, "--block_size", "32"]
    assert main(pretrain_argv(tmp_path / "from_corpus", *corpus_options)) == 0
    cache = tmp_path / "cache"
    assert main(pretrain_argv(tmp_path / "from_cache", *corpus_options, "--tokenized_dir", str(cache))) == 0
    assert (cache / FINGERPRINT_FILE).is_file()

    def losses(run):
        history = json.loads((tmp_path / run / "log_history.json").read_text())
        return [entry["loss"] for entry in history if "loss" in entry]

    assert len(losses("from_cache")) == 2 and losses("from_cache") == losses("from_corpus")


def test_a_validation_share_needs_documents_which_a_cache_has_not(cache, tmp_path):
    argv = pretrain_argv(tmp_path / "out", "--tokenized_dir", str(cache), "--block_size", "32")
    with pytest.raises(ValueError, match=r"--validation_split_percentage holds out documents .* --validation_file"):
        main([*argv, "--validation_split_percentage", "10", "--eval_strategy", "steps", "--eval_steps", "1"])


@pytest.mark.parametrize("streaming", [False, True])
def test_a_single_source_cache_records_its_rows_and_characters(tmp_path, streaming):
    texts = [f"Document {i} about one source, {'and more ' * i}words." for i in range(30)]
    corpus = tmp_path / "one.jsonl"
    corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts), encoding="utf-8")
    # the tokenizer is trained on the corpus: a stream is read twice, and counted once
    argv = ["tokenize", "--method", "mlm", "--corpus", str(corpus), "--vocab_size", "200", "--block_size", "32"]
    assert main([*argv, *(["--streaming"] if streaming else []), "--output_dir", str(tmp_path / "cache")]) == 0
    recorded = json.loads((tmp_path / "cache" / FINGERPRINT_FILE).read_text())["corpus"]
    assert (recorded["rows"], recorded["sizes"], recorded["unit"]) == ([30], [sum(map(len, texts))], "characters")

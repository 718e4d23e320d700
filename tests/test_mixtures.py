"""Weighted corpus mixtures: `--corpus a.jsonl:0.7,b.jsonl:0.3`, parsed, refused when wrong, mixed and counted."""

import json
from collections import Counter

import pytest
from transformers import HfArgumentParser

from hf_encoders.data import CorpusError
from hf_encoders.data.mixtures import Source, SourceShares, load_corpus, parse_sources
from hf_encoders.training.arguments import PretrainArguments


@pytest.mark.parametrize(
    "spec,sources",
    [
        (None, [Source("embedded")]),
        ("web.jsonl", [Source("web.jsonl")]),
        ("web.jsonl:0.7,books/:0.3", [Source("web.jsonl", 0.7), Source("books/", 0.3)]),
        ("a.jsonl:2, b.jsonl:1", [Source("a.jsonl", 2.0), Source("b.jsonl", 1.0)]),
        ("a.jsonl,b.jsonl", [Source("a.jsonl"), Source("b.jsonl")]),
        ("C:/corpus/web.jsonl", [Source("C:/corpus/web.jsonl")]),  # a drive's colon is no weight
        ("C:\\corpus:0.5,d:0.5", [Source("C:\\corpus", 0.5), Source("d", 0.5)]),
    ],
)
def test_sources_and_weights_are_parsed(spec, sources):
    assert parse_sources(spec) == sources


@pytest.mark.parametrize(
    "spec,message",
    [
        ("a.jsonl:0", "the weight must be a positive number, not 0"),
        ("a.jsonl:-1,b.jsonl:2", "the weight must be a positive number, not -1"),
        ("a.jsonl:inf", "the weight must be a positive number, not inf"),
        ("a.jsonl:heavy", "'heavy' is not a number"),
        ("a.jsonl:0.5,b.jsonl", "some sources have a weight and some not"),
        (":0.5", "names no source"),
        ("a.jsonl:1,a.jsonl:2", "a source is named twice"),
    ],
)
def test_bad_mixtures_are_refused(spec, message):
    with pytest.raises(CorpusError, match=message):
        parse_sources(spec)


def test_the_flag_repeated_is_the_comma_form():
    parser = HfArgumentParser(PretrainArguments)
    (repeated,) = parser.parse_args_into_dataclasses(["--method", "mlm", "--corpus", "a:0.7", "--corpus", "b:0.3"])
    (single,) = parser.parse_args_into_dataclasses(["--method", "mlm", "--corpus", "a.jsonl"])
    assert repeated.corpus == "a:0.7,b:0.3" and single.corpus == "a.jsonl"


def test_an_unknown_source_is_named(tmp_path):
    shares = SourceShares(parse_sources(f"{tmp_path / 'missing.jsonl'}:1,embedded:1"))
    with pytest.raises(CorpusError, match=r"missing.jsonl: file does not exist"):
        load_corpus(shares, seed=0)


def write_source(path, prefix, count):
    path.write_text("".join(json.dumps({"text": f"{prefix} {i}."}) + "\n" for i in range(count)), encoding="utf-8")
    return path


def mixed(tmp_path, streaming, seed=0):
    big, small = write_source(tmp_path / "big.jsonl", "Big", 2000), write_source(tmp_path / "small.jsonl", "Sm", 250)
    shares = SourceShares(parse_sources(f"{big}:0.8,{small}:0.2"))
    documents = [row["text"] for row in load_corpus(shares, seed, streaming=streaming)]
    return documents, shares


@pytest.mark.parametrize("streaming", [False, True])
def test_a_mixture_draws_with_its_weights_reads_every_document_and_counts_what_it_read(tmp_path, streaming):
    documents, shares = mixed(tmp_path, streaming)
    by_source = Counter(document.split()[0] for document in documents)
    # all_exhausted: every document of both sources is read; the small one repeats to keep its 20%
    assert {f"Big {i}." for i in range(2000)} <= set(documents) and {f"Sm {i}." for i in range(250)} <= set(documents)
    assert by_source["Big"] / len(documents) == pytest.approx(0.8, abs=0.03)  # 4 standard deviations
    assert (shares.rows[0], shares.rows[1]) == (by_source["Big"], by_source["Sm"])
    sizes = Counter()
    for document in documents:
        sizes[document.split()[0]] += len(document)
    assert (shares.sizes[0], shares.sizes[1]) == (sizes["Big"], sizes["Sm"])
    share = by_source["Big"] / len(documents)
    assert shares.lines()[0] == f"{tmp_path / 'big.jsonl'}: weight 0.8 (80.0%), realised {share:.1%} of rows, " + (
        f"{sizes['Big'] / sum(sizes.values()):.1%} of characters"
    )


def test_a_stream_mixes_as_the_dataset_does_and_the_seed_decides(tmp_path):
    in_memory, _ = mixed(tmp_path, streaming=False)
    streamed, _ = mixed(tmp_path, streaming=True)
    other_seed, _ = mixed(tmp_path, streaming=False, seed=1)
    assert streamed == in_memory and other_seed != in_memory

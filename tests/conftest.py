"""Fixtures shared by several test modules, and the `slow` marker's switch: `pytest` skips the tests marked
`@pytest.mark.slow`, `pytest --runslow` runs them too (README's test command and .ci/run do)."""

import os

import pytest
import torch

from tests.tiny_models import corpus_tokenizer, save_tiny_bert


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="also run the tests marked slow (the full suite)")


def pytest_configure(config):
    """Under pytest-xdist (`-n 2`, README's test command) each worker is one process per core: one intra-op thread
    each, for the worker and the processes its tests start, instead of every process spinning on every core."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models on a shared CPU: intra-op threads spin against other processes, and a module of Trainer runs
    is ~20x faster on one thread. Modules opt in with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def wordpiece_tokenizer():
    """The WordPiece tokenizer trained on the embedded corpus (tests.tiny_models.corpus_tokenizer), once per module:
    a module may change it without reaching another."""
    return corpus_tokenizer()


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """A tiny BERT folder with its tokenizer: the encoder TaCL continues, the tokenizer of the other methods' runs."""
    return save_tiny_bert(tmp_path_factory.mktemp("bert"))

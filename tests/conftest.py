"""Fixtures shared by several test modules."""

import pytest
import torch

from tests.tiny_models import corpus_tokenizer, save_tiny_bert


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

"""Text to model inputs: load a corpus, split it into sentences, train or load a tokenizer, pack blocks."""

from ..errors import CorpusError, TokenizerLoadError
from .corpus import load_documents
from .embedded import embedded_documents
from .masking_units import word_start_mask
from .packing import pack_bert_style, pack_llama_style, tokenize_documents
from .sentences import documents_to_sentences, split_sentences
from .tokenizer import load_or_train_tokenizer, train_wordpiece_tokenizer

__all__ = [
    "CorpusError",
    "TokenizerLoadError",
    "documents_to_sentences",
    "embedded_documents",
    "load_documents",
    "load_or_train_tokenizer",
    "pack_bert_style",
    "pack_llama_style",
    "split_sentences",
    "tokenize_documents",
    "train_wordpiece_tokenizer",
    "word_start_mask",
]

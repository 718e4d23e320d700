"""The unigram plateau: the masked-LM loss of a model that reads no context and predicts only how frequent each
token is. A loss near it means the encoder is not yet used; only a loss well below it shows a model reading context."""

import math
from collections import Counter
from collections.abc import Iterable


def token_counts(tokenizer, texts: Iterable[str]) -> Counter:
    """How often each token id occurs in `texts`, special tokens left out (they are never masked)."""
    counts = Counter()
    for text in texts:
        # verbose=False: whole documents are longer than the model's maximum, and this model is never run on them.
        counts.update(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
    return counts


def unigram_entropy(counts: Counter) -> float:
    """Entropy (nats) of the token frequencies `counts`: the plateau's loss when every masked token shows [MASK]."""
    total = sum(counts.values())
    return -sum(count / total * math.log(count / total) for count in counts.values())

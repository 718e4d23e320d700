"""Every diagnostic for every layer of an encoder, in one streamed pass over a corpus.

Each batch goes through the model twice: as written, and with a share of its real tokens replaced by
the tokenizer's mask token (MAE-LM Sec. 2.2). Only per-layer running sums are kept (a hidden x hidden
Gram matrix per rank, a few numbers for the cosines), so memory does not grow with the corpus.

Which tokens count:
- "real" tokens are those the tokenizer did not add: no padding, no [CLS]/[SEP]/<s>/</s> (the
  tokenizer's special_tokens_mask). The ranks and isotropy use them, so a [CLS] vector repeated in
  every sentence does not pass for a direction of the text's representation space.
- self-similarity counts [CLS] and [SEP] by default, as TaCL's released analysis code does for Fig. 2
  and Fig. 3; `special_tokens_in_similarity=False` restricts it to the real tokens.
"""

import itertools
from collections.abc import Iterable, Iterator, Sized
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from .isotropy import IsotropyMean
from .rank import GramAccumulator
from .similarity import SelfSimilarityMean, similarity_matrix


@dataclass(frozen=True)
class LayerwiseReport:
    """Per-layer diagnostics of one model. Index 0 of each list is the embedding output, index l layer l."""

    model: str
    hidden_size: int
    sentences: int
    real_tokens: int
    mask_tokens: int  # real tokens replaced by the mask token in the masked pass
    rank_threshold: float
    self_similarity: list[float]  # TaCL Eq. 3, mean over sentences (Fig. 2)
    isotropy: list[float]  # mean cosine of two real tokens from different sentences
    effective_rank: list[int]  # real tokens of the clean input (MAE-LM Fig. 1a, "w/o [MASK]")
    # Every real position of the masked input, the [MASK]s included, as the paper's H^l (Fig. 1a, "w. [MASK]").
    effective_rank_with_mask: list[int]
    mask_effective_rank: list[int]  # the [MASK] positions alone (Fig. 1b)

    def to_dict(self) -> dict:
        return asdict(self)


def layerwise_report(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Iterable[str],
    *,
    name: str | None = None,
    batch_size: int = 32,
    max_length: int = 128,
    mask_probability: float = 0.15,
    rank_threshold: float = 0.9,
    special_tokens_in_similarity: bool = True,
    seed: int = 0,
    progress: bool = True,
) -> LayerwiseReport:
    """Self-similarity, isotropy and tau-effective ranks of every layer of `model` over `texts`.

    `model` is any encoder that returns `hidden_states` (one vector per input token) when called with
    `output_hidden_states=True`: what `AutoModel` loads for BERT, RoBERTa, ModernBERT or this package's
    encoders. Sentence by sentence, in corpus order, `torch.Generator().manual_seed(seed)` draws one
    uniform number per token; a real token whose draw falls below `mask_probability` is masked. The
    masks are thus reproducible and do not depend on `batch_size` or padding.
    """
    if tokenizer.mask_token_id is None:
        raise ValueError(
            "The tokenizer has no mask token; set `tokenizer.mask_token` to the one the model was pre-trained with."
        )
    if not 0 < mask_probability <= 1:
        raise ValueError(f"mask_probability must lie in (0, 1], got {mask_probability}.")
    name = name or model.name_or_path or type(model).__name__
    generator = torch.Generator().manual_seed(seed)
    self_similarity, isotropy = SelfSimilarityMean(), IsotropyMean()
    clean_gram, masked_gram, mask_gram = GramAccumulator(), GramAccumulator(), GramAccumulator()
    sentences = 0
    total = len(texts) if isinstance(texts, Sized) else None
    bar = tqdm(total=total, desc=name, unit="sentence", disable=not progress)
    with _evaluating(model), torch.inference_mode(), bar:
        for batch in _batches(texts, batch_size):
            input_ids, attention_mask, real = _encode(tokenizer, batch, max_length, model.device)
            is_masked = real & _bernoulli_per_token(attention_mask, mask_probability, generator).to(model.device)

            hidden = _hidden_states(model, input_ids, attention_mask)
            self_similarity.update(hidden, attention_mask if special_tokens_in_similarity else real)
            isotropy.update(hidden, real)
            clean_gram.update(hidden[:, real])

            hidden = _hidden_states(model, input_ids.masked_fill(is_masked, tokenizer.mask_token_id), attention_mask)
            masked_gram.update(hidden[:, real])
            mask_gram.update(hidden[:, is_masked])

            sentences += len(batch)
            bar.update(len(batch))
    if sentences == 0:
        raise ValueError("No texts to analyse.")
    return LayerwiseReport(
        model=name,
        hidden_size=hidden.shape[-1],
        sentences=sentences,
        real_tokens=clean_gram.rows,
        mask_tokens=mask_gram.rows,
        rank_threshold=rank_threshold,
        self_similarity=self_similarity.value().tolist(),
        isotropy=isotropy.value().tolist(),
        effective_rank=clean_gram.effective_rank(rank_threshold).tolist(),
        effective_rank_with_mask=masked_gram.effective_rank(rank_threshold).tolist(),
        mask_effective_rank=mask_gram.effective_rank(rank_threshold).tolist(),
    )


def token_similarity_matrix(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, text: str, *, layer: int = -1, max_length: int = 128
) -> tuple[list[str], torch.Tensor]:
    """The tokens of `text`, special ones included, and their cosine similarity matrix at `layer` (TaCL Fig. 3)."""
    with _evaluating(model), torch.inference_mode():
        input_ids, attention_mask, _ = _encode(tokenizer, [text], max_length, model.device)
        hidden = _hidden_states(model, input_ids, attention_mask)[layer, 0]
    return tokenizer.convert_ids_to_tokens(input_ids[0].tolist()), similarity_matrix(hidden).cpu()


def _encode(
    tokenizer: PreTrainedTokenizerBase, texts: list[str], max_length: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded input ids, attention mask, and the mask of real (not tokenizer-added) tokens."""
    encoded = tokenizer(
        texts,
        truncation=True,
        max_length=max_length,
        padding=True,
        return_special_tokens_mask=True,
        return_tensors="pt",
    )
    attention_mask = encoded["attention_mask"].bool()
    real = attention_mask & ~encoded["special_tokens_mask"].bool()
    return encoded["input_ids"].to(device), attention_mask.to(device), real.to(device)


def _bernoulli_per_token(attention_mask: torch.Tensor, probability: float, generator: torch.Generator) -> torch.Tensor:
    """A Bernoulli(`probability`) choice per token, drawn sentence by sentence so that padding shifts none."""
    chosen = torch.zeros(attention_mask.shape, dtype=torch.bool)
    for row, tokens in enumerate(attention_mask.cpu()):
        chosen[row, tokens] = torch.rand(int(tokens.sum()), generator=generator) < probability
    return chosen


def _hidden_states(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Every layer's output stacked as (layers + 1, batch, seq, hidden)."""
    outputs = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    if outputs.hidden_states is None:
        raise ValueError(
            f"{type(model).__name__} returned no hidden_states; load the encoder with AutoModel.from_pretrained."
        )
    hidden = torch.stack(outputs.hidden_states)
    if hidden.shape[1:3] != input_ids.shape:
        raise ValueError(
            f"{type(model).__name__} returned hidden states of shape {tuple(hidden.shape[1:3])} for inputs of shape "
            f"{tuple(input_ids.shape)}; the analysis needs one vector per input token."
        )
    return hidden


def _batches(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    iterator = iter(texts)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


@contextmanager
def _evaluating(model: PreTrainedModel) -> Iterator[None]:
    """Dropout off while analysing, and the caller's training mode back afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)

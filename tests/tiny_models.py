"""Tiny configurations of the models and their students, and the tiny tokenizers, models and data built on
them, shared by the tests. A method's tests find its tiny config in its specification (tests/method_specs.py)."""

import torch
from transformers import BertConfig

from hf_encoders import BiphasicConfig, MaeLmConfig, TaclConfig

VOCAB_SIZE = 64
MASK_TOKEN_ID = 4


def tiny_mae_lm_config(**overrides) -> MaeLmConfig:
    settings = dict(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        decoder_num_hidden_layers=1,
        max_position_embeddings=64,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        pad_token_id=0,
        mask_token_id=MASK_TOKEN_ID,
        num_labels=3,
    )
    return MaeLmConfig(**{**settings, **overrides})


# The tiny shape of TaCL's students (BERT, RoBERTa, ModernBERT).
BERT_SHAPE = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    pad_token_id=0,
)


def tiny_modernbert_config(**overrides):
    """BERT_SHAPE as a ModernBERT, with the special ids and the attention window it needs."""
    from transformers import ModernBertConfig

    settings = dict(
        cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3, local_attention=8, global_attn_every_n_layers=2
    )
    return ModernBertConfig(**{**BERT_SHAPE, **settings, **overrides})


def tiny_tacl_config(student_config=None, **overrides) -> TaclConfig:
    """TaCL around a tiny BERT student (so NSP is on) unless another student config is given."""
    return TaclConfig(student_config=student_config or BertConfig(**BERT_SHAPE), **overrides)


# The tiny Llama-family shape (Llama, Qwen2, Mistral, EuroBERT, and the biphasic encoder that converts them):
# grouped-query attention, pad 0, BOS 1, EOS 2.
LLAMA_SHAPE = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    rms_norm_eps=1e-5,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)


def tiny_biphasic_config(**overrides) -> BiphasicConfig:
    """LLAMA_SHAPE, with the [MASK] id and three labels."""
    return BiphasicConfig(**{**LLAMA_SHAPE, "mask_token_id": MASK_TOKEN_ID, "num_labels": 3, **overrides})


def sample_batch(seed: int = 0, batch_size: int = 2, length: int = 12) -> dict[str, torch.Tensor]:
    """Token ids with a few [MASK]s and one padded row tail, as a collator would produce them."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, VOCAB_SIZE, (batch_size, length), generator=generator)
    input_ids[:, 3] = MASK_TOKEN_ID
    input_ids[0, 7] = MASK_TOKEN_ID
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, length - 3 :] = 0
    input_ids[-1, length - 3 :] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


# Each style's special tokens in id order (0-4): the tiny configs' pad 0 and mask 4 in both; for the Llama style
# also tiny_biphasic_config's BOS 1 and EOS 2.
SPECIAL_TOKENS = {
    "bert": {
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "mask_token": "[MASK]",
    },
    "llama": {
        "pad_token": "<pad>",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "mask_token": "<mask>",
    },
}


def tiny_tokenizer(style: str = "bert", words=None, cls_sep_template: bool = False, **roles):
    """A fast word-level tokenizer over the tiny models' ids: the style's special tokens take ids 0-4
    (bert: [PAD] [UNK] [CLS] [SEP] [MASK]; llama: <pad> <s> </s> <unk> <mask>), then one id per word of `words`
    (default w5 ... w63), split at whitespace.

    `roles` give a role another token or none (`pad_token="</s>"`, `mask_token=None`) without moving any id: a token
    left without a role stays in the vocabulary as a plain word. `cls_sep_template` wraps a single text as
    [CLS] text [SEP], as BERT's tokenizer does."""
    from tokenizers import Tokenizer, processors
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    specials = SPECIAL_TOKENS[style]
    words = [f"w{i}" for i in range(len(specials), VOCAB_SIZE)] if words is None else list(words)
    vocab = {token: index for index, token in enumerate([*specials.values(), *words])}
    assert len(vocab) == len(specials) + len(words) <= VOCAB_SIZE, "words must be distinct and fit the tiny vocabulary"
    backend = Tokenizer(WordLevel(vocab, unk_token=specials["unk_token"]))
    backend.pre_tokenizer = WhitespaceSplit()
    if cls_sep_template:
        cls, sep = specials["cls_token"], specials["sep_token"]
        backend.post_processor = processors.TemplateProcessing(
            single=f"{cls} $A {sep}", special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])]
        )
    return PreTrainedTokenizerFast(tokenizer_object=backend, **{**specials, **roles})


def tiny_llama(**overrides):
    """A seeded random Llama causal LM of LLAMA_SHAPE, in eval mode: what the conversion tests convert."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**{**LLAMA_SHAPE, **overrides})).eval()


def corpus_tokenizer(vocab_size: int = 300):
    """A WordPiece tokenizer trained on the embedded corpus's first 40 documents (BERT's special ids 0-4)."""
    from hf_encoders.data import embedded_documents, train_wordpiece_tokenizer

    return train_wordpiece_tokenizer(embedded_documents()[:40], vocab_size=vocab_size)


def save_tiny_bert(folder, model_class=None, **overrides) -> str:
    """A tiny pretrained-looking BERT checkpoint (BertForPreTraining, so with an NSP head, unless `model_class` says
    otherwise) saved with its `corpus_tokenizer()`: what TaCL continues from, and other runs' tokenizer."""
    from transformers import BertForPreTraining

    tokenizer = corpus_tokenizer()
    settings = dict(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
    )
    (model_class or BertForPreTraining)(BertConfig(**{**settings, **overrides})).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def save_tiny_mae_lm(folder) -> str:
    """A tiny MaeLmForMaskedLM checkpoint saved with its `corpus_tokenizer()`, for commands that read a folder."""
    from hf_encoders import MaeLmForMaskedLM

    tokenizer = corpus_tokenizer()
    MaeLmForMaskedLM(tiny_mae_lm_config(vocab_size=len(tokenizer))).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


# ---- trainable pre-training models and data ----


def extra_inputs(method: str, batch_size: int) -> dict:
    """What a method's pre-training forward needs besides ids, mask and labels (TaCL's BERT student: NSP)."""
    return {"next_sentence_label": torch.zeros(batch_size, dtype=torch.long)} if method == "tacl" else {}


def counting_batch(method: str, generator: torch.Generator, batch_size: int = 8, length: int = 16) -> dict:
    """What the method's collator would give on learnable data: rows counting up from a random token, right-padded to
    random lengths (at least half), 30% of the real tokens masked and labelled (MLM methods) or next-token labels
    (CLM)."""
    start = torch.randint(0, VOCAB_SIZE - 5, (batch_size, 1), generator=generator)
    ids = 5 + (start + torch.arange(length)) % (VOCAB_SIZE - 5)
    lengths = torch.randint(length // 2, length + 1, (batch_size,), generator=generator)
    lengths[0] = length
    attention_mask = (torch.arange(length) < lengths[:, None]).long()
    ids = ids.masked_fill(attention_mask == 0, 0)
    if method == "biphasic-clm":
        labels = torch.full_like(ids, -100)
        labels[:, :-1] = ids[:, 1:].masked_fill(attention_mask[:, 1:] == 0, -100)
        return {"input_ids": ids, "attention_mask": attention_mask, "labels": labels}
    chosen = (torch.rand(ids.shape, generator=generator) < 0.3) & attention_mask.bool()
    chosen[:, 1] = True  # every row has a target
    batch = {
        "input_ids": ids.masked_fill(chosen, MASK_TOKEN_ID),
        "attention_mask": attention_mask,
        "labels": ids.masked_fill(~chosen, -100),
    }
    if method == "tacl":
        batch["token_type_ids"] = (torch.arange(length) >= lengths[:, None] // 2).long() * attention_mask
        batch["next_sentence_label"] = torch.randint(0, 2, (batch_size,), generator=generator)
    return batch


class CountingExamples(torch.utils.data.Dataset):
    """`size` examples of `counting_batch` (seed 0), one row each: a Trainer's train_dataset."""

    def __init__(self, method="mae_lm", size=64):
        generator = torch.Generator().manual_seed(0)
        batch = counting_batch(method, generator, batch_size=size)
        self.rows = [{key: value[i] for key, value in batch.items()} for i in range(size)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        return self.rows[index]

"""Tiny configurations of every model family, shared by the tests. Add a family here and the remote-code
round trip covers all of its classes."""

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


def tiny_tacl_config(student_config=None, **overrides) -> TaclConfig:
    """TaCL around a tiny BERT student (so NSP is on) unless another student config is given."""
    if student_config is None:
        student_config = BertConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            pad_token_id=0,
        )
    return TaclConfig(student_config=student_config, **overrides)


def tiny_biphasic_config(**overrides) -> BiphasicConfig:
    """Grouped-query attention (4 heads, 2 KV heads); pad 0, BOS 1, EOS 2."""
    settings = dict(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        mask_token_id=MASK_TOKEN_ID,
        num_labels=3,
    )
    return BiphasicConfig(**{**settings, **overrides})


TINY_CONFIGS = {"mae_lm": tiny_mae_lm_config, "tacl": tiny_tacl_config, "biphasic": tiny_biphasic_config}


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


def tiny_tokenizer():
    """A fast tokenizer over the tiny models' ids: [PAD] [UNK] [CLS] [SEP] [MASK] w5 ... w63 (whitespace words)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    vocab = {
        "[PAD]": 0,
        "[UNK]": 1,
        "[CLS]": 2,
        "[SEP]": 3,
        "[MASK]": MASK_TOKEN_ID,
        **{f"w{i}": i for i in range(5, VOCAB_SIZE)},
    }
    backend = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )

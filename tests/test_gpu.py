"""What only a CUDA device can show (bench/gpu.sh runs these on a lent GPU; skipped without CUDA): bf16 numerics,
the sdpa kernels CUDA picks, packed documents and torch.compile's graphs on the device."""

import copy

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch.nn.attention import SDPBackend, sdpa_kernel

from hf_encoders import BiphasicEncoder, DataCollatorForMaeLm, MaeLmForMaskedLM, MaeLmModel
from hf_encoders.models.mae_lm.relative_attention import cudnn_nan_free_sdpa
from tests.test_compile import FORWARDS, assert_step_compiles_at_most_twice, bert_collated, step_results
from tests.test_long_context import CONFIG, packed_padded_batch, step, use_path
from tests.test_packed_documents import documents, packed
from tests.tiny_models import MASK_TOKEN_ID, tiny_biphasic_config, tiny_mae_lm_config

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
FUSED = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]


def on_cuda(batch: dict) -> dict:
    return {key: value.cuda() if isinstance(value, torch.Tensor) else value for key, value in batch.items()}


def assert_relatively_close(actual: torch.Tensor, expected: torch.Tensor, tolerance: float, name: str = "") -> None:
    """||actual - expected|| / ||expected|| within `tolerance`: a gradient as small as the tiny models' bias-table one
    (entries near 1e-5) passes any absolute tolerance, wrong or right."""
    error = (actual.float() - expected.float()).norm() / expected.float().norm()
    assert expected.norm() > 0 and error <= tolerance, f"{name}: relative error {error:.2e} > {tolerance}"


@pytest.mark.parametrize("name", FORWARDS)
def test_bf16_autocast_losses_stay_near_fp32(name):
    build, batch = FORWARDS[name]
    torch.manual_seed(0)
    model = build().cuda().eval()
    batch = on_cuda(batch(1))
    with torch.no_grad():
        full = model(**batch).loss
        with torch.autocast("cuda", dtype=torch.bfloat16):
            half = model(**batch).loss
    torch.testing.assert_close(half.float(), full, rtol=2e-2, atol=2e-2)


# Every attention path under sdpa: MAE-LM's dense bias (short) and query blocks (long), biphasic's two masks, TaCL's
# BERT student (inside FORWARDS' TaCL model).
SDPA_PATHS = {
    "mae_lm dense bias": ("mae_lm", None),
    "mae_lm query blocks": ("mae_lm", 0),
    "biphasic mlm": ("biphasic_mlm", None),
    "biphasic clm": ("biphasic_clm", None),
    "tacl": ("tacl", None),
}


@pytest.mark.parametrize("path", SDPA_PATHS)
def test_sdpa_runs_a_fused_kernel_on_every_attention_path(path):
    """The math kernel is switched off: a path that needs it (a mask the fused kernels refuse) raises, forward or
    backward."""
    name, dense_bias_max_length = SDPA_PATHS[path]
    build, batch = FORWARDS[name]
    model = build().cuda().train()
    if dense_bias_max_length is not None:
        model.mae_lm.dense_bias_max_length = dense_bias_max_length
    with sdpa_kernel(FUSED), torch.autocast("cuda", dtype=torch.bfloat16):
        model(**on_cuda(batch(1))).loss.backward()


# flex_attention's CUDA kernel needs heads at least 16 wide: the tiny models' hidden size of 32 in two heads.
WIDE_HEADS = {
    MaeLmModel: dict(num_attention_heads=2),
    BiphasicEncoder: dict(num_attention_heads=2, num_key_value_heads=1),
}


@pytest.mark.parametrize("attention", ["sdpa", "flex_attention"])
@pytest.mark.parametrize("model_class", [MaeLmModel, BiphasicEncoder])
def test_a_packed_document_gets_the_outputs_it_gets_alone_on_cuda(model_class, attention):
    config = tiny_mae_lm_config if model_class is MaeLmModel else tiny_biphasic_config
    torch.manual_seed(0)
    model = model_class(config(attn_implementation=attention, **WIDE_HEADS[model_class])).cuda().eval()
    docs = [doc.cuda() for doc in documents()]
    with torch.no_grad():
        together = model(**on_cuda(packed(docs))).last_hidden_state[0]
        alone = torch.cat([model(input_ids=doc[None]).last_hidden_state[0] for doc in docs])
    torch.testing.assert_close(together, alone, rtol=1e-4, atol=1e-4)


def test_mae_lm_flex_attention_trains_as_sdpa_on_cuda():
    """The compiled flex kernel's backward (GPU-only): the same loss and bias-table gradient as the dense sdpa bias,
    up to the atomic adds' rounding."""
    torch.manual_seed(0)
    config = tiny_mae_lm_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **WIDE_HEADS[MaeLmModel])
    sdpa = MaeLmForMaskedLM(config).cuda().train()
    flex = copy.deepcopy(sdpa)
    flex.set_attn_implementation("flex_attention")
    ids = torch.randint(5, 60, (2, 40), device="cuda")
    masked = torch.rand(2, 40, device="cuda") < 0.3
    batch = {"input_ids": ids.masked_fill(masked, MASK_TOKEN_ID), "labels": torch.where(masked, ids, -100)}
    losses, gradients = [], []
    for model in (sdpa, flex):
        loss = model(**batch).loss
        loss.backward()
        losses.append(loss.detach())
        gradients.append(model.mae_lm.relative_attention_bias.weight.grad)
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-4, atol=1e-4)
    assert_relatively_close(gradients[1], gradients[0], 1e-3)


@pytest.mark.parametrize("name", FORWARDS)
def test_changing_mask_counts_compile_the_step_at_most_twice_on_cuda(name):
    """tests/test_compile.py's bound, with inductor's CUDA graphs counted."""
    build, batch = FORWARDS[name]
    assert_step_compiles_at_most_twice(build().cuda(), batch, on_cuda)


@pytest.mark.parametrize("compiled", [False, True], ids=["flex compiled alone", "whole model compiled"])
def test_mae_lm_flex_training_step_equals_the_dense_eager_bias_on_cuda(compiled):
    """MAE-LM's CUDA default path, in fp32 on a batch with padding, packed documents, compaction and δ: the same loss and
    encoder states (rtol and atol 1e-4) and every gradient (within 1e-3 of its norm: the bias table's gradient comes
    from the kernel's atomic adds) as eager attention with the whole dense bias; then the same loss after an AdamW
    step (1e-3)."""
    torch.manual_seed(0)
    base = MaeLmForMaskedLM(tiny_mae_lm_config(**CONFIG, **WIDE_HEADS[MaeLmModel])).cuda()
    batch = on_cuda(packed_padded_batch())
    results = []
    for path in ("dense eager", "flex"):
        model = use_path(copy.deepcopy(base), path).train()
        run = torch.compile(model) if compiled and path == "flex" else model
        loss, states, gradients = step(run, batch)
        torch.optim.AdamW(model.parameters(), lr=1e-3).step()
        results.append((loss, states, gradients, run(**batch).loss.detach()))
    (loss, states, gradients, after), (flex_loss, flex_states, flex_gradients, flex_after) = results
    torch.testing.assert_close(flex_loss, loss, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(flex_states, states, rtol=1e-4, atol=1e-4)
    assert flex_gradients.keys() == gradients.keys()
    for name, gradient in gradients.items():
        assert_relatively_close(flex_gradients[name], gradient, 1e-3, name)
    torch.testing.assert_close(flex_after, after, rtol=1e-3, atol=1e-3)


def test_mae_lm_flex_bf16_compiled_step_stays_near_fp32_eager_on_cuda():
    """The pretrain default on CUDA (bf16 autocast, compiled, flex): the loss within bf16's rounding (2e-2) of the fp32
    dense eager step, the bias table's gradient within 5e-2 of its norm (a bias left out would be 1 off)."""
    torch.manual_seed(0)
    base = MaeLmForMaskedLM(tiny_mae_lm_config(**CONFIG, **WIDE_HEADS[MaeLmModel])).cuda()
    batch = on_cuda(packed_padded_batch())
    loss, _, gradients = step(use_path(copy.deepcopy(base), "dense eager").train(), batch)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        half_loss, _, half_gradients = step(torch.compile(use_path(copy.deepcopy(base), "flex").train()), batch)
    name = "mae_lm.relative_attention_bias.weight"
    torch.testing.assert_close(half_loss.float(), loss, rtol=2e-2, atol=2e-2)
    assert_relatively_close(half_gradients[name], gradients[name], 5e-2, name)


def test_sdpa_with_a_mask_is_kept_off_cudnn_where_its_backward_returns_nan():
    """pytorch/pytorch#196678's reproduction (L mod 128 = 64, a mask, every row's logsumexp below -88.7) inside the
    guard MAE-LM's sdpa calls run in: finite query gradients equal to the efficient kernel's."""
    torch.manual_seed(0)
    length, width = 704, 64
    query = torch.randn(1, 1, length, width, device="cuda", dtype=torch.bfloat16) * 0.1
    key = torch.randn(1, 1, length, width, device="cuda", dtype=torch.bfloat16) * 0.1
    value = torch.randn(1, 1, length, width, device="cuda", dtype=torch.bfloat16)
    query[..., 0], key[..., 0] = 1.0, -120 * width**0.5
    mask = torch.ones(length, length, dtype=torch.bool, device="cuda").tril()[None, None]
    gradients = []
    for guard in (cudnn_nan_free_sdpa(query, length, masked=True), sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION)):
        inputs = [tensor.clone().requires_grad_() for tensor in (query, key, value)]
        with guard:
            output = torch.nn.functional.scaled_dot_product_attention(*inputs, attn_mask=mask)
        output.backward(torch.ones_like(output))
        gradients.append(inputs[0].grad)
    assert torch.isfinite(gradients[0]).all()
    torch.testing.assert_close(gradients[0], gradients[1])


@pytest.mark.parametrize("delta", [0.0, 0.5])
def test_mae_lm_flex_step_compiles_to_one_graph_over_collated_batches_on_cuda(delta):
    """tests/test_compile.py's one graph for a whole run, on MAE-LM's CUDA default (flex_attention, whose backward
    has no CPU kernel): its collator's batches, with their index tensors, compile forward and backward with
    fullgraph=True, dynamic=False into one graph, equal to eager (gradients within 1e-3 of their norm: the bias
    table's comes from the kernel's atomic adds)."""
    config = tiny_mae_lm_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **WIDE_HEADS[MaeLmModel])
    torch.manual_seed(0)
    model = MaeLmForMaskedLM(config).cuda().train()
    model.set_attn_implementation("flex_attention")
    batches = [on_cuda(batch) for batch in bert_collated(DataCollatorForMaeLm, mask_in_encoder_fraction=delta)()]
    eager = [step_results(model, batch) for batch in batches]
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=counter, fullgraph=True, dynamic=False)
    for batch, (loss, gradients) in zip(batches, eager):
        compiled_loss, compiled_gradients = step_results(compiled, batch)
        torch.testing.assert_close(compiled_loss, loss, rtol=1e-4, atol=1e-4)
        for index, (compiled_gradient, gradient) in enumerate(zip(compiled_gradients, gradients, strict=True)):
            if gradient.norm() > 0:
                assert_relatively_close(compiled_gradient, gradient, 1e-3, f"gradient {index}")
    assert counter.frame_count == 1

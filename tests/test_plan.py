"""`hf-encoders plan`: a preset's parameters, tokens, FLOPs, GPU-hours, memory and accumulation against hand
computations from the papers' architectures and hyper-parameters."""

import math

import pytest

from hf_encoders.training.plan import make_plan
from hf_encoders.training.presets import get_preset, presets
from hf_encoders_cli import main


def bert_layer(h: int, ffn: int) -> int:
    """A post-LN BERT layer: q, k, v, o with biases, two FFN matrices with biases, two LayerNorms."""
    return 4 * (h * h + h) + (h * ffn + ffn) + (ffn * h + h) + 2 * 2 * h


def test_mae_lm_base_parameters_flops_and_hours_by_hand():
    h, vocab, positions = 768, 32_768, 512
    encoder = vocab * h + positions * h + 2 * h + 32 * 12 + 12 * bert_layer(h, 3072)  # + relative bias (32 x 12 heads)
    decoder = positions * h + 2 * h + 4 * bert_layer(h, 3072)  # own positions and embedding LayerNorm
    head = (h * h + h) + 2 * h + vocab  # dense, LayerNorm, vocabulary bias (the projection is tied)
    parameters = encoder + decoder + head
    plan = make_plan(get_preset("mae_lm-base"), gpus=8, gpu="h100")
    assert plan.parameters == plan.trained_parameters == parameters
    tokens = 125_000 * 2048 * 512
    assert plan.tokens == tokens and plan.tokens_per_step == 2048 * 512
    flops = tokens * (6 * parameters + 12 * (12 + 4) * h * 512)
    assert plan.flops == pytest.approx(flops)
    # MFU: bench/README.md's 123.6 useful TFLOP/s on an H200 (989 dense), on an H100 (989 dense too).
    hours = flops / (123.6 / 989 * 989e12) / 3600
    assert plan.gpu_hours == pytest.approx(hours) and plan.days == pytest.approx(hours / 8 / 24)
    micro = 64
    memory = 16 * parameters + 34 * micro * 512 * 16 * h + 10 * math.ceil(micro * 512 * 0.15) * vocab
    assert plan.memory_bytes == memory
    assert plan.accumulation == 2048 // (micro * 8)


def test_biphasic_210m_parameters_by_the_llama_formula_and_a100_hours_at_a_given_mfu():
    h, ffn, layers, vocab = 768, 3072, 12, 128_256
    parameters = 2 * vocab * h + layers * (4 * h * h + 3 * h * ffn + 2 * h) + h  # untied head, RMSNorm weights
    plan = make_plan(get_preset("biphasic-210m"), gpus=192, gpu="a100", mfu=0.4)
    assert plan.parameters == parameters
    tokens = 42_000 * 2_359_296
    assert plan.tokens == tokens
    flops = tokens * (6 * parameters + 12 * layers * h * 2048)
    assert plan.gpu_hours == pytest.approx(flops / (0.4 * 312e12) / 3600)
    assert plan.accumulation == 1 and plan.mfu_source == "--mfu"  # 6 blocks x 192 GPUs = 1,152


@pytest.mark.parametrize(
    "name,h,layers,ffn,kv",
    [
        ("biphasic-210m", 768, 12, 3072, 768),
        ("biphasic-610m", 1152, 26, 4096, 384),
        ("biphasic-1b", 1728, 28, 5120, 576),
    ],
)
def test_the_encoder_without_its_lm_head_is_the_size_the_biphasic_presets_name(capsys, name, h, layers, ffn, kv):
    """The paper's (and EuroBERT's) 210M, 610M and 1B count the embeddings and layers, not the untied LM head that
    pre-training adds: `plan` gives both numbers, and the encoder's rounds to the name."""
    vocab = 128_256
    encoder = vocab * h + layers * (2 * h * h + 2 * h * kv + 3 * h * ffn + 2 * h) + h  # RMSNorm weights, no biases
    plan = make_plan(get_preset(name))
    assert plan.encoder_parameters == encoder and plan.parameters == encoder + vocab * h
    size = float(name.split("-")[1].removesuffix("m").removesuffix("b")) * (1e6 if name.endswith("m") else 1e9)
    assert abs(encoder - size) / size < 0.2
    assert main(["plan", "--preset", name]) == 0
    out = capsys.readouterr().out
    assert (
        f"  parameters      {encoder + vocab * h:,} " in out
        and f"  encoder         {encoder:,} (no pre-training" in out
    )


def test_tacl_counts_its_frozen_teacher_forward_only():
    plan = make_plan(get_preset("tacl-bert-base"))
    teacher = plan.parameters - plan.trained_parameters
    h, layers, length = 768, 12, 256
    assert (
        plan.flops_per_token
        == 6 * plan.trained_parameters + 2 * teacher + 12 * layers * h * length + 4 * layers * h * length
    )


def test_the_accumulation_reaches_at_least_the_papers_batch_and_says_so_when_it_overshoots():
    plan = make_plan(get_preset("mae_lm-base"), gpus=3)
    assert plan.accumulation == 11  # 64 x 3 x 11 = 2,112 >= 2,048
    assert "= 2,112 sequences, paper: 2048" in plan.lines()[-1]


def test_plan_lists_the_papers_presets_and_refuses_bad_input(capsys):
    assert main(["plan", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(presets(small=False))
    assert main(["plan", "--preset", "biphasic-1b", "--gpus", "8", "--gpu", "h200"]) == 0
    out = capsys.readouterr().out
    h, kv, ffn = 1728, 576, 5120  # 6 of 18 heads of 96 carry keys and values
    parameters = 2 * 128_256 * h + 28 * (2 * h * h + 2 * h * kv + 3 * h * ffn + 2 * h) + h
    assert f"parameters      {parameters:,} " in out
    assert "accumulation    24" in out  # 1,152 / (6 x 8)
    with pytest.raises(ValueError, match="mae_lm-tiny is a small-run preset: it sets no budget to plan"):
        main(["plan", "--preset", "mae_lm-tiny"])
    with pytest.raises(ValueError, match="--gpus must be at least 1"):
        main(["plan", "--preset", "mae_lm-base", "--gpus", "0"])
    with pytest.raises(SystemExit):
        main(["plan"])

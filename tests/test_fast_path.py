"""`hf-encoders pretrain` on a CUDA device takes the fast settings unless a flag says otherwise (training/fast_path.py),
decided here for a described device: bf16, fused AdamW and the compiled step as the parser's defaults, flex_attention
without attention dropout for MAE-LM, a vocabulary padded to a multiple of 64; `--fp8` refused where it cannot
run. The training options are parsed with --use_cpu, which TrainingArguments needs to accept bf16 on a machine with no
GPU, and a CUDA device described to the decision."""

import json

import accelerate.utils
import pytest
import torch
from transformers import TrainingArguments

from hf_encoders import MaeLmForMaskedLM
from hf_encoders.models.mae_lm.modeling_mae_lm import MaeLmAttention
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.fast_path import Device, check_fp8_run, choose_attention, fp8_unavailable
from hf_encoders.training.measures import known_peak_tflops
from hf_encoders.training.pretrain import build_trainer, fit_model_to_device, parse_arguments
from tests.tiny_models import tiny_mae_lm_config

H100 = Device("cuda", (9, 0), "NVIDIA H100 80GB HBM3")
A100 = Device("cuda", (8, 0), "NVIDIA A100-SXM4-80GB")
CPU = Device("cpu")


def parsed(tmp_path, device, *flags):
    argv = ["--method", "mae_lm", "--output_dir", str(tmp_path), "--use_cpu", *flags]
    return parse_arguments(argv, device=device)[1]


def fast(training_args) -> tuple:
    return training_args.bf16, training_args.optim.value, training_args.torch_compile


def test_a_cuda_device_takes_bf16_fused_adamw_and_the_compiled_step_by_default(tmp_path):
    assert fast(parsed(tmp_path, H100)) == (True, "adamw_torch_fused", True)
    assert parsed(tmp_path, H100).mixed_precision == "bf16"


def test_other_devices_keep_transformers_defaults(tmp_path):
    assert fast(parsed(tmp_path, CPU)) == (False, "adamw_torch_fused", False)


@pytest.mark.parametrize(
    "flags,expected",
    [
        (["--bf16", "false"], (False, "adamw_torch_fused", True)),
        (["--bf16=False"], (False, "adamw_torch_fused", True)),
        (["--optim", "adamw_torch"], (True, "adamw_torch", True)),
        (["--torch_compile", "false"], (True, "adamw_torch_fused", False)),
        (["--torch-compile=no"], (True, "adamw_torch_fused", False)),  # the parser's dashed alias
    ],
)
def test_a_flag_given_wins_over_the_fast_default(tmp_path, flags, expected):
    assert fast(parsed(tmp_path, H100, *flags)) == expected


@pytest.mark.parametrize("device", [H100, CPU], ids=["cuda", "cpu"])
def test_pretrain_leaves_transformers_nan_inf_filter_off_unless_given(tmp_path, device):
    """The filter reads every step's loss from the device."""
    assert parsed(tmp_path, device).logging_nan_inf_filter is False
    assert parsed(tmp_path, device, "--logging_nan_inf_filter", "true").logging_nan_inf_filter is True


def test_a_json_file_of_options_wins_too(tmp_path):
    options = {"method": "mae_lm", "output_dir": str(tmp_path), "use_cpu": True, "torch_compile": False}
    (tmp_path / "run.json").write_text(json.dumps(options))
    _, training_args = parse_arguments([str(tmp_path / "run.json")], device=H100)
    assert fast(training_args) == (True, "adamw_torch_fused", False)


def test_a_gpu_without_bf16_keeps_fp32(tmp_path):
    assert fast(parsed(tmp_path, Device("cuda", (7, 0), "Tesla V100-SXM2-32GB"))) == (False, "adamw_torch_fused", True)


def test_mae_lm_takes_flex_attention_on_cuda_and_drops_its_attention_dropout():
    choice = choose_attention("mae_lm", H100, None, 0.1, dropout_given=False)
    assert (choice.implementation, choice.without_attention_dropout) == ("flex_attention", True)
    assert "attention_probs_dropout_prob 0.1 -> 0. --attn_implementation sdpa keeps it" in choice.message
    # Given sdpa, or another device, or another method: nothing changes.
    for method, device, given in [("mae_lm", H100, "sdpa"), ("mae_lm", CPU, None), ("biphasic", H100, None)]:
        choice = choose_attention(method, device, given, 0.1, dropout_given=False)
        assert (choice.implementation, choice.without_attention_dropout) == (given, False)


def test_an_attention_dropout_given_keeps_mae_lm_on_sdpa_or_refuses_flex_given_too():
    choice = choose_attention("mae_lm", H100, None, 0.1, dropout_given=True)
    assert (choice.implementation, choice.without_attention_dropout) == (None, False)
    assert "keeps MAE-LM on sdpa" in choice.message
    with pytest.raises(ValueError, match=r"flex_attention has no attention dropout, but --config_overrides sets"):
        choose_attention("mae_lm", H100, "flex_attention", 0.1, dropout_given=True)


def test_the_model_built_for_a_cuda_device_has_flex_no_attention_dropout_and_a_padded_vocabulary():
    model = MaeLmForMaskedLM(tiny_mae_lm_config(vocab_size=70, attention_probs_dropout_prob=0.1))
    fit_model_to_device(model, PretrainArguments(method="mae_lm"), H100)
    assert model.config._attn_implementation == "flex_attention"
    assert model.config.attention_probs_dropout_prob == 0.0
    assert {module.dropout for module in model.modules() if isinstance(module, MaeLmAttention)} == {0.0}
    assert model.config.vocab_size == 128
    assert model.lm_head.vocab_projection.bias.shape == (128,)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    ids = torch.randint(5, 60, (2, 12))
    with torch.no_grad():  # flex_attention runs its forward on CPU
        assert model.eval()(input_ids=ids).logits.shape == (2, 12, 128)


def test_the_model_built_elsewhere_is_left_as_it_is():
    model = MaeLmForMaskedLM(tiny_mae_lm_config(vocab_size=70, attention_probs_dropout_prob=0.1))
    fit_model_to_device(model, PretrainArguments(method="mae_lm"), CPU)
    assert (model.config._attn_implementation, model.config.vocab_size) == ("sdpa", 70)
    assert model.config.attention_probs_dropout_prob == 0.1
    fit_model_to_device(model, PretrainArguments(method="mae_lm", pad_vocab_to_multiple_of=32), CPU)
    assert model.config.vocab_size == 96


def test_fp8_is_refused_with_one_line_where_it_cannot_run(tmp_path):
    argv = ["--method", "mae_lm", "--output_dir", str(tmp_path), "--fp8"]
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"^--fp8 needs a GPU with FP8 tensor cores \(H100, H200\); this run has"):
            parse_arguments(argv)
    assert "compute capability 8.9 or higher); NVIDIA A100-SXM4-80GB has 8.0. Drop --fp8" in fp8_unavailable(A100, {})
    assert (
        fp8_unavailable(H100, {"bf16": True})
        == "--fp8 runs the operations it does not run in FP8 in bf16 already: drop --bf16."
    )


def test_fp8_without_torchao_names_the_extra_to_install():
    if accelerate.utils.is_torchao_available():
        pytest.skip("torchao is installed here")
    assert (
        fp8_unavailable(H100, {})
        == "--fp8 runs through torchao, which is not installed: pip install 'hf-encoders[fp8]' (torchao)."
    )


def test_a_run_built_in_python_with_fp8_is_refused_before_it_trains(tmp_path, monkeypatch):
    training_args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    with pytest.raises(ValueError, match=r"^--fp8 needs a GPU with FP8 tensor cores"):
        build_trainer(PretrainArguments(method="mae_lm", fp8=True), training_args)
    # On an H100 with torchao, TrainingArguments built without fp8 mixed precision would train in bf16 without a word.
    monkeypatch.setattr(accelerate.utils, "is_torchao_available", lambda: True)
    with pytest.raises(ValueError, match="needs TrainingArguments built for accelerate's fp8 mixed precision"):
        check_fp8_run(H100, training_args)


@pytest.mark.parametrize(
    "name,peak",
    [
        ("NVIDIA H100 80GB HBM3", 989.0),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H100 NVL", 835.0),
        ("NVIDIA H200", 989.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("Tesla T4", None),
    ],
)
def test_mfu_knows_the_dense_bf16_peak_of_each_part(name, peak):
    assert known_peak_tflops(name) == peak

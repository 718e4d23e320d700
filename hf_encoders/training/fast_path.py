"""What `hf-encoders pretrain` does by default on a CUDA device, and the flags that turn each part off.

On a CUDA GPU a run takes the fast settings, each unless the command line sets it:

| setting | switched off with |
|---|---|
| bf16 autocast (GPUs with bf16, compute capability 8.0 on) | `--bf16 false` |
| fused AdamW | `--optim adamw_torch` |
| the compiled step (Trainer's `torch.compile`) | `--torch_compile false` |
| flex_attention for MAE-LM, at every length | `--attn_implementation sdpa` |
| the vocabulary of a model built from scratch padded to a multiple of 64 | `--pad_vocab_to_multiple_of 1` |

The training ones are the parser's defaults on such a device (`training_defaults`), above a preset's values
(training/presets.py), so a flag given always wins, as the parser reads it (`--bf16=false`, `--no_...`, a JSON file's
keys). Other devices keep transformers' defaults, but one: on every device `--logging_nan_inf_filter` is off unless
given, since the filter reads every step's loss from the device (a wait for it at each step); `NonFiniteLossCallback`
watches the losses on the device instead and stops a run whose loss stopped being finite, and the logged loss shows a
non-finite step rather than hide it.

MAE-LM's flex_attention has no attention dropout (the paper's is 0.1): a run on the flex path trains without it,
said in the log; `--attn_implementation sdpa` keeps the configured dropout. Asking for both flex_attention and a
positive `attention_probs_dropout_prob` in `--config_overrides` is refused; with flex left to the default, the
explicit dropout wins and the run stays on sdpa.

`--fp8`: FP8 matmuls through accelerate's torchao backend (`mixed_precision="fp8"`: torchao's `Float8Linear` for the
linear layers but the first and last, bf16 autocast for the rest), on GPUs with FP8 tensor cores only.
"""

import os
from dataclasses import dataclass

import torch

# TrainingArguments defaults on a CUDA device (`optim` is already Trainer's default from torch 2.8 on: stated so that
# the table above holds on every torch this package supports).
FAST_TRAINING_DEFAULTS = {"bf16": True, "optim": "adamw_torch_fused", "torch_compile": True}
# TrainingArguments defaults of `pretrain` on every device: a step that does not log waits for nothing.
NO_WAIT_DEFAULTS = {"logging_nan_inf_filter": False}
# The attention implementation each method takes by default on a CUDA device, where it differs from sdpa.
FAST_ATTENTION = {"mae_lm": "flex_attention"}
# Tensor-core tiles and vocabulary-parallel shards divide a vocabulary of a multiple of 64 evenly.
FAST_VOCAB_MULTIPLE = 64
FP8_FIX = "pip install 'hf-encoders[fp8]' (torchao)"


@dataclass(frozen=True)
class Device:
    """What the fast settings depend on: the device type a run trains on and, for CUDA, the GPU's compute capability
    and name. Built by `this_device`, or by hand to decide for another machine (tests)."""

    type: str
    capability: tuple[int, int] | None = None
    name: str = ""

    @property
    def is_cuda(self) -> bool:
        return self.type == "cuda"

    @property
    def has_bf16(self) -> bool:
        return self.is_cuda and self.capability >= (8, 0)

    @property
    def has_fp8(self) -> bool:
        """FP8 tensor cores: Ada and Hopper (8.9, 9.0: H100, H200) and later."""
        return self.is_cuda and self.capability >= (8, 9)


def this_device(use_cpu: bool = False) -> Device:
    """The device a run trains on: CUDA when a GPU is visible and `--use_cpu` is not given; any other device gets
    transformers' defaults, so it is described as a CPU."""
    if use_cpu or not torch.cuda.is_available():
        return Device("cpu")
    return Device("cuda", torch.cuda.get_device_capability(), torch.cuda.get_device_name())


def training_defaults(device: Device, fp8: bool = False) -> dict:
    """TrainingArguments defaults of a run on `device`: `NO_WAIT_DEFAULTS`, and `FAST_TRAINING_DEFAULTS` on CUDA. bf16
    is left off with `--fp8` (accelerate's fp8 mixed precision autocasts to bf16 itself, and `--bf16` would replace
    it) and on GPUs without bf16."""
    if not device.is_cuda:
        return dict(NO_WAIT_DEFAULTS)
    defaults = {**NO_WAIT_DEFAULTS, **FAST_TRAINING_DEFAULTS}
    if fp8 or not device.has_bf16:
        del defaults["bf16"]
    return defaults


def vocab_multiple(device: Device, given: int | None) -> int:
    """`--pad_vocab_to_multiple_of`, or by default 64 on CUDA and 1 (no padding) elsewhere."""
    if given is not None:
        if given < 1:
            raise ValueError(f"--pad_vocab_to_multiple_of must be at least 1 (1: no padding), got {given}.")
        return given
    return FAST_VOCAB_MULTIPLE if device.is_cuda else 1


def attention_dropout_given(config_overrides: str | None) -> bool:
    """Whether `--config_overrides` sets `attention_probs_dropout_prob`."""
    keys = (item.partition("=")[0].strip() for item in (config_overrides or "").split(","))
    return "attention_probs_dropout_prob" in keys


@dataclass(frozen=True)
class AttentionChoice:
    """The attention implementation of a run (None: the model's own) and whether the model drops its attention
    dropout for it, with the log line that says so (None when nothing needs saying)."""

    implementation: str | None
    without_attention_dropout: bool = False
    message: str | None = None


def choose_attention(
    method: str, device: Device, given: str | None, attention_dropout: float, dropout_given: bool
) -> AttentionChoice:
    """`--attn_implementation` if given, else the method's fast one on CUDA (`FAST_ATTENTION`); on flex_attention,
    which has no attention dropout, the model's `attention_dropout` is dropped, unless `--config_overrides` set it
    (`dropout_given`): then an explicit flex_attention is refused, and a default one yields to sdpa."""
    implementation = given if given is not None else FAST_ATTENTION.get(method) if device.is_cuda else None
    if implementation != "flex_attention" or attention_dropout == 0:
        return AttentionChoice(implementation)
    if dropout_given and given is not None:
        raise ValueError(
            f"--attn_implementation flex_attention has no attention dropout, but --config_overrides sets "
            f"attention_probs_dropout_prob={attention_dropout}: drop one of them (sdpa takes the dropout)."
        )
    if dropout_given:
        return AttentionChoice(
            None,
            message=f"attention_probs_dropout_prob={attention_dropout} (--config_overrides) keeps MAE-LM on sdpa: "
            "flex_attention, the default on CUDA, has no attention dropout.",
        )
    return AttentionChoice(
        implementation,
        without_attention_dropout=True,
        message=f"Training on flex_attention, which has no attention dropout: attention_probs_dropout_prob "
        f"{attention_dropout} -> 0. --attn_implementation sdpa keeps it.",
    )


def drop_attention_dropout(model: torch.nn.Module) -> None:
    """Set the attention dropout of an MAE-LM model (its config, saved with it, and every attention module) to 0."""
    from ..models.mae_lm.modeling_mae_lm import MaeLmAttention

    model.config.attention_probs_dropout_prob = 0.0
    for module in model.modules():
        if isinstance(module, MaeLmAttention):
            module.dropout = 0.0


def fp8_unavailable(device: Device, given: dict) -> str | None:
    """Why `--fp8` cannot run here (one line naming the fix), or None when it can: it needs a GPU with FP8 tensor
    cores, torchao, and no --fp16/--bf16 of its own."""
    if not device.is_cuda:
        return "--fp8 needs a GPU with FP8 tensor cores (H100, H200); this run has no CUDA device. Drop --fp8."
    if not device.has_fp8:
        major, minor = device.capability
        return (
            f"--fp8 needs a GPU with FP8 tensor cores (H100, H200: compute capability 8.9 or higher); {device.name} "
            f"has {major}.{minor}. Drop --fp8: bf16 is the default on CUDA."
        )
    for flag in ("fp16", "bf16"):
        if given.get(flag):
            return f"--fp8 runs the operations it does not run in FP8 in bf16 already: drop --{flag}."
    from accelerate.utils import is_torchao_available

    if not is_torchao_available():
        return f"--fp8 runs through torchao, which is not installed: {FP8_FIX}."
    return None


def enable_fp8(device: Device, given: dict) -> None:
    """Refuse `--fp8` where it cannot run; else ask accelerate for FP8 training with its torchao backend, as `accelerate
    launch --mixed_precision fp8 --fp8_backend ao` does (TrainingArguments reads the mixed precision when it is
    built, Trainer's accelerator the backend)."""
    reason = fp8_unavailable(device, given)
    if reason:
        raise ValueError(reason)
    os.environ["ACCELERATE_MIXED_PRECISION"] = "fp8"
    os.environ["ACCELERATE_FP8_BACKEND"] = "AO"


def check_fp8_run(device: Device, training_args) -> None:
    """Refuse a run built with `fp8=True` that cannot train in FP8: the device, torchao, or TrainingArguments built
    without accelerate's fp8 mixed precision (a Python caller: `enable_fp8` first, as the command does)."""
    reason = fp8_unavailable(device, {"fp16": training_args.fp16, "bf16": training_args.bf16})
    if reason is None and training_args.mixed_precision != "fp8":
        reason = (
            "fp8=True needs TrainingArguments built for accelerate's fp8 mixed precision: call "
            "hf_encoders.training.fast_path.enable_fp8 before building them, as hf-encoders pretrain --fp8 does."
        )
    if reason:
        raise ValueError(reason)

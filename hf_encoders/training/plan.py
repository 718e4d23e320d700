"""`hf-encoders plan`: what a preset's run costs before it starts: parameters, tokens, steps, FLOPs, GPU-hours and
days on N GPUs, the memory a step needs and the gradient accumulation that reaches the paper's batch.

hf-encoders plan --preset mae_lm-base --gpus 8 --gpu h100
hf-encoders plan --list

The model is built on the meta device (no memory, no weights), so its parameters are counted exactly. FLOPs are 6 per
trained parameter and token, 2 per frozen one, plus attention (training/measures.py, the count the logged `mfu`
uses). Time divides them by the GPU's dense bf16 peak times an MFU: this package's measured one (bench/README.md)
where the method has one, else `--mfu` or the stated assumption.
"""

import argparse
import math
from dataclasses import dataclass

from hf_encoders_cli import CommandParser

from .presets import TRAINER_MICRO_BATCH, Preset

GPUS = {"h100": "H100", "h200": "H200", "a100": "A100"}
# Useful TFLOP/s that bench/run.py measured per method (bench/README.md, "GPU": eager, an H200, 12 x 768, batch
# 32 x 512, bf16), as a fraction of the H200's dense peak: the MFU a plan assumes for that method.
MEASURED_TFLOPS = {"tacl": 238.8, "mae_lm": 123.6, "biphasic": 187.6}
MEASURED_ON = "H200"
MEASURED_SOURCE = "bench/README.md, eager, 12 x 768, 32 x 512"
# For a method bench/README.md has no row for.
ASSUMED_MFU = 0.3
# Bytes a step keeps per parameter: trained, fp32 weights, gradients and AdamW's two moments; frozen, fp32 weights.
TRAINED_BYTES, FROZEN_BYTES = 16, 4
# Activations kept for backward per token, layer and unit of width, in bf16 without stored attention scores
# (sdpa and flash kernels recompute them): Korthikanti et al. (2022), "Reducing Activation Recomputation".
ACTIVATION_BYTES = 34
# Per predicted position and vocabulary entry: bf16 logits, their fp32 copy for the loss and its gradient.
LOGIT_BYTES = 10


@dataclass(frozen=True)
class Plan:
    preset: Preset
    gpus: int
    gpu: str
    parameters: int
    trained_parameters: int
    # The trained model's base model: the encoder fine-tuning loads, without the pre-training heads (MAE-LM's
    # decoder, biphasic's untied LM head). The size in a model's name counts this (biphasic-210m: 212M, of 310M).
    encoder_parameters: int
    steps: int
    block_size: int
    flops_per_token: int
    mfu: float
    mfu_source: str
    memory_bytes: int

    @property
    def tokens_per_step(self) -> int:
        return self.preset.batch_size.value * self.block_size

    @property
    def tokens(self) -> int:
        return self.steps * self.tokens_per_step

    @property
    def flops(self) -> float:
        return float(self.tokens) * self.flops_per_token

    @property
    def peak_tflops(self) -> float:
        from .measures import known_peak_tflops

        return known_peak_tflops(GPUS[self.gpu])

    @property
    def gpu_hours(self) -> float:
        return self.flops / (self.mfu * self.peak_tflops * 1e12) / 3600

    @property
    def days(self) -> float:
        return self.gpu_hours / self.gpus / 24

    @property
    def micro_batch(self) -> int:
        return self.preset.value("per_device_train_batch_size", TRAINER_MICRO_BATCH)

    @property
    def accumulation(self) -> int:
        return self.preset.accumulation(self.micro_batch, self.gpus)

    def schedule(self) -> str:
        value = self.preset.value
        warmup = value("warmup_steps", 0)
        warmup = f"{warmup:.0%} of the steps" if 0 < warmup < 1 else f"{warmup:,} steps"
        kind = value("lr_scheduler_type", "linear")
        decay = (value("lr_scheduler_kwargs") or {}).get("num_decay_steps")
        shape = f"warm-up-stable-decay, the last {decay:,} steps decaying" if decay else f"{kind} decay"
        return f"peak {value('learning_rate')}, warm-up {warmup}, {shape}"

    def line(self) -> str:
        """The one line `pretrain` prints at the start of a preset's run."""
        return (
            f"Plan of {self.preset.name}: {self.parameters / 1e6:,.1f}M parameters ({self.encoder_parameters / 1e6:,.1f}M "
            f"without the pre-training heads), {self.tokens:.3g} tokens "
            f"({self.steps:,} steps of {self.tokens_per_step:,}), {self.flops:.2e} FLOPs, about "
            f"{self.gpu_hours:,.1f} {GPUS[self.gpu]} GPU-hours at MFU {self.mfu:.2f} ({self.days:,.1f} days on "
            f"{self.gpus}); micro-batch {self.micro_batch} x {self.accumulation} accumulation, about "
            f"{self.memory_bytes / 2**30:,.1f} GiB a GPU."
        )

    def lines(self) -> list[str]:
        batch = self.micro_batch * self.gpus * self.accumulation
        reached = "the paper's" if batch == self.preset.batch_size.value else f"paper: {self.preset.batch_size.value}"
        return [
            f"{self.preset.name}: {self.preset.summary} ({self.preset.paper})",
            f"  parameters      {self.parameters:,} ({self.trained_parameters:,} trained)",
            f"  encoder         {self.encoder_parameters:,} (no pre-training heads: what fine-tuning loads, what a "
            "name's size counts)",
            f"  steps           {self.steps:,}",
            f"  tokens per step {self.tokens_per_step:,} ({self.preset.batch_size.value:,} x {self.block_size:,})",
            f"  tokens          {self.tokens:,}",
            f"  schedule        {self.schedule()}",
            f"  FLOPs           {self.flops:.3e} ({self.flops_per_token:,} per token, attention included)",
            f"  MFU             {self.mfu:.3f} ({self.mfu_source})",
            f"  GPU-hours       {self.gpu_hours:,.0f} on {GPUS[self.gpu]} ({self.peak_tflops:g} TFLOP/s dense bf16)",
            f"  days            {self.days:,.1f} on {self.gpus} GPU{'s' if self.gpus > 1 else ''}",
            f"  memory a step   about {self.memory_bytes / 2**30:,.1f} GiB a GPU at micro-batch {self.micro_batch} "
            "(weights, gradients, AdamW state, activations, logits)",
            f"  accumulation    {self.accumulation} (micro-batch {self.micro_batch} x {self.gpus} GPUs x "
            f"{self.accumulation} = {batch:,} sequences, {reached})",
        ]


def build_models(preset: Preset):
    """(trained, frozen or None): the preset's models on the meta device, from its config fields."""
    import torch

    from ..methods import load

    model_class = load(preset.model)
    fields = {key: item.value for key, item in preset.config.items()}
    if "vocab_size" in preset.options:
        fields["vocab_size"] = preset.value("vocab_size")
    config = model_class.config_class(**fields)
    with torch.device("meta"):
        trained = model_class(config)
        frozen = load(preset.frozen)(config) if preset.frozen else None
    if frozen is not None:
        frozen.requires_grad_(False)
    return trained, frozen


def attention_layers(config) -> int:
    return config.num_hidden_layers + getattr(config, "decoder_num_hidden_layers", 0)


def memory_bytes(trained, frozen, micro_batch: int, block_size: int, predicted: float) -> int:
    """The memory a step needs on one GPU, estimated: see the constants above."""
    config = trained.config
    parameters = TRAINED_BYTES * sum(p.numel() for p in trained.parameters())
    if frozen is not None:
        parameters += FROZEN_BYTES * sum(p.numel() for p in frozen.parameters())
    tokens = micro_batch * block_size
    activations = ACTIVATION_BYTES * tokens * attention_layers(config) * config.hidden_size
    logits = LOGIT_BYTES * math.ceil(tokens * predicted) * config.vocab_size
    return parameters + activations + logits


def predicted_share(preset: Preset) -> float:
    """The share of positions scored against the vocabulary: every one in a CLM phase, else the masked ones."""
    if "clm" in preset.value("phases", ""):
        return 1.0
    return preset.value("mlm_probability", 0.15)


def measured_mfu(method: str) -> tuple[float, str] | None:
    from .measures import known_peak_tflops

    if method not in MEASURED_TFLOPS:
        return None
    tflops = MEASURED_TFLOPS[method]
    peak = known_peak_tflops(MEASURED_ON)
    return tflops / peak, f"measured: {tflops} useful TFLOP/s of the {MEASURED_ON}'s {peak:g}; {MEASURED_SOURCE}"


def make_plan(preset: Preset, gpus: int = 1, gpu: str = "h100", mfu: float | None = None) -> Plan:
    from .measures import attention_flops_per_token, flops_per_token

    if preset.batch_size is None:
        raise ValueError(f"{preset.name} is a small-run preset: it sets no budget to plan. Pass a paper's preset.")
    if gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {gpus}.")
    if mfu is not None and not 0 < mfu <= 1:
        raise ValueError(f"--mfu must lie in (0, 1], got {mfu}.")
    trained, frozen = build_models(preset)
    block_size = preset.value("block_size")
    per_token = flops_per_token(trained) + (flops_per_token(frozen) if frozen is not None else 0)
    config = trained.config
    per_token += attention_flops_per_token(attention_layers(config), config.hidden_size, block_size)
    if frozen is not None:
        per_token += attention_flops_per_token(config.num_hidden_layers, config.hidden_size, block_size, False)
    if mfu is not None:
        chosen = (mfu, "--mfu")
    else:
        chosen = measured_mfu(preset.method) or (ASSUMED_MFU, "assumed: bench/README.md has no row for this method")
    parameters = sum(p.numel() for p in trained.parameters())
    frozen_parameters = sum(p.numel() for p in frozen.parameters()) if frozen is not None else 0
    return Plan(
        preset=preset,
        gpus=gpus,
        gpu=gpu,
        parameters=parameters + frozen_parameters,
        trained_parameters=parameters,
        encoder_parameters=sum(p.numel() for p in trained.base_model.parameters()),
        steps=preset.value("max_steps"),
        block_size=block_size,
        flops_per_token=per_token,
        mfu=chosen[0],
        mfu_source=chosen[1],
        memory_bytes=memory_bytes(
            trained,
            frozen,
            preset.value("per_device_train_batch_size", TRAINER_MICRO_BATCH),
            block_size,
            predicted_share(preset),
        ),
    )


def gpu_key(device_name: str) -> str:
    """The `--gpu` a device name is (an H100's figures for any other device)."""
    return next((key for key, name in GPUS.items() if name in device_name), "h100")


def as_run(preset: Preset, args, training_args) -> Preset:
    """The preset as this run sets it (its overrides in place), for the plan line a run logs."""
    from dataclasses import replace

    from ..methods import load
    from .model_sizes import parse_config_overrides
    from .presets import Sourced

    def value(option):
        return getattr(args, option) if hasattr(args, option) else getattr(training_args, option)

    config_class = load(preset.model).config_class
    config = parse_config_overrides(args.config_overrides, config_class) if preset.config else {}
    batch = training_args.per_device_train_batch_size * training_args.world_size
    return replace(
        preset,
        options={option: Sourced(value(option), "this run") for option in preset.options},
        config={key: Sourced(item, "this run") for key, item in config.items()},
        batch_size=Sourced(batch * training_args.gradient_accumulation_steps, "this run"),
    )


def plan_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="hf-encoders plan",
        description="What a preset's pre-training costs before it starts: parameters, tokens, steps and schedule, "
        "FLOPs, GPU-hours and days, the memory a step needs and the gradient accumulation that reaches the paper's "
        "batch on N GPUs.",
    )
    parser.add_argument("--preset", help="The preset to plan (--list names them).")
    parser.add_argument("--list", action="store_true", help="List the papers' presets, one line each.")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs the run trains on (default 1).")
    parser.add_argument("--gpu", choices=list(GPUS), default="h100", help="The GPU (default h100).")
    parser.add_argument(
        "--mfu",
        type=float,
        help="Model FLOPs utilisation to assume, in (0, 1]. Default: the one bench/README.md measured for the "
        f"method, else {ASSUMED_MFU}.",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    from .presets import get_preset, presets

    parser = plan_parser()
    args = parser.parse_args(argv)
    if args.list:
        for preset in presets(small=False).values():
            print(f"{preset.name:<20} {preset.summary} ({preset.paper})")
        return 0
    if args.preset is None:
        parser.error("pass --preset NAME, or --list to see the presets.")
    print("\n".join(make_plan(get_preset(args.preset), args.gpus, args.gpu, args.mfu).lines()))
    return 0

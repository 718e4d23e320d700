"""Where one training step's time goes: torch.profiler over a few steps of MAE-LM (as `hf-encoders pretrain` runs it on
the device) and of BertForMaskedLM, same shape and batch (bench/run.py's 15% comparison).

    python bench/profile_step.py                                                     # CPU: 2 layers x 128, 4 x 128
    python bench/profile_step.py --layers 12 --hidden 768 --batch 32 --length 512 --dtype bfloat16   # GPU

Per model and step: the wall-clock time, the device's busy time (the sum of its kernels' and copies' time: on CPU,
every operator's own time), the host waits (`aten::_local_scalar_dense`, a value read back by `.item()`, `.tolist()`
or `bool()`; `cudaStreamSynchronize` and `cudaDeviceSynchronize`; device-to-host copies) and the kernels that take
most of the device's time. A step with no host wait can be captured whole by CUDA graphs and never stalls the host.
"""

import argparse
import time

import torch
from run import TimedStep, built_on, comparisons, ours_attention, synchronize
from torch.profiler import ProfilerActivity, profile

COMPARISON = "MAE-LM vs BertForMaskedLM, 15% masked"
SCALAR_READ = "aten::_local_scalar_dense"
SYNCHRONIZATIONS = ("cudaStreamSynchronize", "cudaDeviceSynchronize")


def is_device_copy_to_host(name: str) -> bool:
    return name.startswith("Memcpy DtoH")


def summary(events, steps: int, on_gpu: bool, top: int = 6) -> dict:
    """Per step: the device's busy milliseconds, the host waits and the `top` kernels (name, share of the busy time)
    from a profile's `key_averages()`."""
    if on_gpu:
        device_events = [event for event in events if event.device_type == torch.autograd.DeviceType.CUDA]
        busy = {event.key: event.self_device_time_total for event in device_events}
    else:
        busy = {event.key: event.self_cpu_time_total for event in events}
    total = sum(busy.values()) or 1.0
    counts = {event.key: event.count for event in events}
    return {
        "busy_ms": total / 1e3 / steps,
        "scalar_reads": counts.get(SCALAR_READ, 0) / steps,
        "synchronizations": sum(counts.get(name, 0) for name in SYNCHRONIZATIONS) / steps,
        "copies_to_host": sum(count for name, count in counts.items() if is_device_copy_to_host(name)) / steps,
        "top": [(name, time / total) for name, time in sorted(busy.items(), key=lambda item: -item[1])[:top]],
    }


def profiled(step: TimedStep, steps: int, on_gpu: bool) -> tuple[float, dict]:
    """(median wall-clock ms of `steps` steps, `summary` of their profile), after two warm-up steps."""
    for _ in range(2):
        step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    times = []
    with profile(activities=activities) as recorded:
        for _ in range(steps):
            synchronize(step.device)
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3, summary(recorded.key_averages(), steps, on_gpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    settings = parser.parse_args()
    settings.attn_implementation = "auto"
    on_gpu = settings.device == "cuda"
    comparison = next(row for row in comparisons(settings) if row.name == COMPARISON)
    attention = ours_attention(settings, comparison.method)
    models = {
        f"MAE-LM ({attention})": TimedStep(
            built_on(settings.device, comparison.ours), comparison.ours_batch(), settings, attention
        ),
        "BertForMaskedLM (sdpa)": TimedStep(
            built_on(settings.device, comparison.anchor), comparison.anchor_batch(), settings
        ),
    }
    print(
        f"{settings.layers} layers x {settings.hidden}, batch {settings.batch} x {settings.length}, {settings.device}, "
        f"{settings.dtype}, eager, {settings.steps} profiled steps; per step:"
    )
    print(
        "| model | wall ms | device busy ms | scalar reads (.item, .tolist) | stream/device synchronizations "
        "| device-to-host copies | top kernels, share of the device's busy time |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, step in models.items():
        wall, measured = profiled(step, settings.steps, on_gpu)
        # A kernel's name may hold a "|", which would split the table's cell.
        top = "; ".join(f"{kernel[:60].replace('|', '/')} {share:.0%}" for kernel, share in measured["top"])
        print(
            f"| {name} | {wall:.1f} | {measured['busy_ms']:.1f} | {measured['scalar_reads']:g} | "
            f"{measured['synchronizations']:g} | {measured['copies_to_host']:g} | {top} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

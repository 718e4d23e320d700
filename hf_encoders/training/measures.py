"""What `PretrainingTrainer` measures between two logs: the mean of each loss term and the real tokens per second
(with MFU). Sums stay on the device between logs, so measuring costs no host-device sync per step; a log reads them."""

import math
import time

import torch

# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity, from the datasheets), by a name `torch.cuda.get_device_name`
# contains; the first that matches counts, so the slower PCIe and NVL parts come before the SXM ones.
PEAK_TFLOPS = {"H100 PCIe": 756.0, "H100 NVL": 835.0, "H100": 989.0, "H200 NVL": 835.0, "H200": 989.0, "A100": 312.0}


def check_peak_tflops(peak_tflops: float | None) -> None:
    if peak_tflops is not None and peak_tflops <= 0:
        raise ValueError(f"--peak_tflops must be positive (the device's dense TFLOP/s), got {peak_tflops}.")


def known_peak_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of a GPU `PEAK_TFLOPS` knows, by its name; None for another."""
    return next((peak for gpu, peak in PEAK_TFLOPS.items() if gpu in device_name), None)


def flops_per_token(model: torch.nn.Module) -> int:
    """Model FLOPs a trained token costs, attention scores left out: 6 per trained parameter (forward and backward)
    and 2 per frozen one (TaCL's teacher, forward only)."""
    return sum(p.numel() * (6 if p.requires_grad else 2) for p in model.parameters())


def attention_flops_per_token(layers: int, width: int, length: int, trained: bool = True) -> int:
    """What `flops_per_token` leaves out: QK^T and AV, 4 * length * width per token and layer forward (3x that
    trained)."""
    return (12 if trained else 4) * layers * width * length


def reduced_over_ranks(tensor: torch.Tensor, op=None) -> torch.Tensor:
    """`tensor` summed (or reduced with `op`) over the processes of a distributed run; itself in a single process."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(tensor, op=op or torch.distributed.ReduceOp.SUM)
    return tensor


def loss_terms(output, names: tuple[str, ...] | None) -> dict[str, torch.Tensor]:
    """The loss terms a forward returns: the fields `names` of its output, or with None every `*_loss` field but
    `loss` itself (TaCL's `tacl_loss`, `mlm_loss`, `nsp_loss`). A term returned as None (TaCL's NSP with NSP off) is
    left out."""
    if names is None:
        names = [name for name in (output.keys() if hasattr(output, "keys") else ()) if name.endswith("_loss")]
    terms = {name: getattr(output, name, None) for name in names}
    return {name: value for name, value in terms.items() if isinstance(value, torch.Tensor)}


class TermMeans:
    """The weighted mean of each loss term over the forwards since it was last read."""

    def __init__(self):
        self.sums: dict[str, torch.Tensor] = {}
        self.weights: dict[str, int] = {}

    def add(self, terms: dict[str, torch.Tensor], weight: int = 1) -> None:
        for name, value in terms.items():
            value = value.detach().float() * weight
            self.sums[name] = self.sums[name] + value if name in self.sums else value
            self.weights[name] = self.weights.get(name, 0) + weight

    def pop(self, world_size: int, prefix: str = "") -> dict[str, float]:
        """The means (averaged over the ranks, as Trainer averages `loss`, so the terms still add up to it), named
        with `prefix`; the sums start again from zero."""
        if not self.sums:
            return {}
        names = list(self.sums)
        means = reduced_over_ranks(torch.stack([self.sums[name] / self.weights[name] for name in names]))
        self.sums, self.weights = {}, {}
        return {prefix + name: mean for name, mean in zip(names, (means / world_size).tolist())}


def perplexity(loss: float) -> float:
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf


class Throughput:
    """`tokens_per_second`: real tokens (the attention mask's, padding excluded) of the training forwards since the
    previous training log, summed over processes, over the wall-clock time between the logs less the evaluations'
    and diagnostics' (their logs' `eval_runtime` and `diagnostics_runtime`).

    With the device's dense peak known (`peak_tflops`, else `PEAK_TFLOPS` for the GPU in use) also `mfu`: model FLOPs
    per second over the peak of all processes, counting 6 FLOPs per trained parameter and token and 2 per frozen one
    (TaCL's teacher). That is the usual approximation: attention scores, and the [MASK] positions MAE-LM's encoder
    skips, are not counted; bench/run.py counts both.
    """

    def __init__(self, model: torch.nn.Module, peak_tflops: float | None = None):
        self.flops_per_token = flops_per_token(model)
        if peak_tflops is None and torch.cuda.is_available():
            peak_tflops = known_peak_tflops(torch.cuda.get_device_name())
        self.peak_tflops = peak_tflops
        self.tokens: torch.Tensor | None = None
        self.since, self.not_training = time.perf_counter(), 0.0

    def add(self, inputs: dict) -> None:
        mask, ids = inputs.get("attention_mask"), inputs.get("input_ids")
        if mask is None and ids is None:
            return
        count = (mask.sum() if mask is not None else torch.tensor(ids.numel(), device=ids.device)).detach()
        self.tokens = count if self.tokens is None else self.tokens + count

    def pop(self, logs: dict, device, world_size: int) -> dict[str, float]:
        """The measures a log gets: none but an evaluation's or probe's time set aside, unless it is a training log."""
        # Time spent evaluating (after the previous training log) or probing is not training time.
        self.not_training += logs.get("eval_runtime", 0.0) + logs.get("diagnostics_runtime", 0.0)
        if "loss" not in logs:
            return {}
        now = time.perf_counter()
        tokens = self.tokens if self.tokens is not None else torch.zeros((), device=device)
        training_seconds = max(now - self.since - self.not_training, 1e-9)
        per_second = float(reduced_over_ranks(tokens.to(device))) / training_seconds
        measures = {"tokens_per_second": round(per_second, 1)}
        if self.peak_tflops:
            measures["mfu"] = round(per_second * self.flops_per_token / (self.peak_tflops * 1e12 * world_size), 4)
        self.tokens, self.since, self.not_training = None, now, 0.0
        return measures

"""Helpers shared by several test modules: fresh interpreters that cannot import hf_encoders, what a checkpoint's
auto_map and code folder hold, and the arguments of a tiny `hf-encoders pretrain` run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import TrainingArguments

from hf_encoders.training.arguments import PretrainArguments

# The child `run_in_fresh_process` starts: loads each job, runs the batch, writes the outputs.
LOAD_IN_FRESH_PROCESS = Path(__file__).with_name("load_in_fresh_process.py")


def fresh_interpreter(script: str, arguments: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run `script` in a new interpreter that cannot import hf_encoders: offline, cwd outside the repository,
    no PYTHONPATH, its own dynamic-modules cache."""
    (tmp_path / "fresh.py").write_text(script)
    outside = tmp_path / "elsewhere"
    outside.mkdir(exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"), "PYTHONPATH": ""}
    return subprocess.run(
        [sys.executable, str(tmp_path / "fresh.py"), *arguments],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def run_in_fresh_process(jobs: list[tuple[str, str]], batch: dict, tmp_path: Path) -> dict[str, torch.Tensor]:
    """Load each (auto class, folder) job with trust_remote_code in a fresh interpreter (see `fresh_interpreter`)
    and return its outputs on `batch`: "{index}" the first output, "{index}.auto_map" the loaded config's
    auto_map length."""
    save_file(batch, tmp_path / "batch.safetensors")
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    completed = fresh_interpreter(
        LOAD_IN_FRESH_PROCESS.read_text(),
        [str(tmp_path / "jobs.json"), str(tmp_path / "batch.safetensors"), str(tmp_path / "out.safetensors")],
        tmp_path,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = load_file(tmp_path / "out.safetensors")
    assert results.pop("hf_encoders_imported").item() == 0, "the fresh process imported hf_encoders"
    return results


def first_output(output) -> torch.Tensor:
    """The logits, or the first output of a model without them (the bare encoders)."""
    return output.logits if getattr(output, "logits", None) is not None else output.to_tuple()[0]


def assert_close_at_real_tokens(got: torch.Tensor, expected: torch.Tensor, attention_mask: torch.Tensor, **tolerance):
    """Per-token outputs compared where `attention_mask` is 1: our encoders drop padding before the first layer and
    give zeros there (ModernBERT's convention), where stock models compute states nobody reads. Per-sequence
    outputs (a classifier's logits) are compared whole."""
    if got.shape[:2] == attention_mask.shape:
        real = attention_mask.bool()
        got, expected = got[real], expected[real]
    torch.testing.assert_close(got, expected, **tolerance)


def model_folder_files(model_class) -> set[str]:
    """The code a checkpoint must carry: exactly the files of the method's model folder."""
    folder = Path(sys.modules[model_class.__module__].__file__).parent
    return {p.name for p in folder.glob("*.py")} - {"__init__.py"}


def auto_map_classes(config) -> list[tuple[str, type]]:
    """(auto class name, our class) for every model entry of the config's auto_map."""
    import hf_encoders

    return [
        (auto_class, getattr(hf_encoders, reference.split(".")[-1]))
        for auto_class, reference in type(config).default_auto_map.items()
        if auto_class != "AutoConfig"
    ]


def tiny_run_arguments(method: str, bert: str, **overrides) -> PretrainArguments:
    """`hf-encoders pretrain` of a tiny run on the embedded corpus with a validation split; `bert` is a tiny BERT
    folder (tests.tiny_models.save_tiny_bert): the encoder TaCL continues, the tokenizer of the others."""
    start = {"model_name_or_path": bert} if method == "tacl" else {"tokenizer_name": bert}
    if method == "biphasic":
        start["phases"] = "clm:0.5,mlm:0.5"
    settings = dict(method=method, max_documents=40, block_size=32, validation_split_percentage=20, **start)
    return PretrainArguments(**{**settings, **overrides})


def tiny_training_arguments(output_dir, **overrides) -> TrainingArguments:
    """Four CPU steps, evaluated every two, nothing saved or reported."""
    settings = dict(
        output_dir=str(output_dir),
        report_to="none",
        max_steps=4,
        logging_steps=2,
        eval_strategy="steps",
        eval_steps=2,
        per_device_train_batch_size=4,
        per_device_eval_batch_size=3,  # the held-out blocks do not fill the last batch: weighting shows
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    return TrainingArguments(**{**settings, **overrides})


class DeviceReads(torch.overrides.TorchFunctionMode):
    """Counts, while active, the calls that read a tensor's value back to the host (a wait for the device on a GPU):
    `.item()`, `.tolist()`, `bool()` / `int()` / `float()` / `index()` of a tensor, `nonzero`, `unique`, and indexing
    with a boolean tensor. `reads` lists each one's function name."""

    READS = {
        torch.Tensor.item,
        torch.Tensor.tolist,
        torch.Tensor.__bool__,
        torch.Tensor.__int__,
        torch.Tensor.__float__,
        torch.Tensor.__index__,
        torch.Tensor.nonzero,
        torch.nonzero,
        torch.argwhere,
        torch.Tensor.unique,
        torch.unique,
        torch.Tensor.masked_select,
        torch.masked_select,
    }

    def __init__(self):
        super().__init__()
        self.reads = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self.READS or (func is torch.Tensor.__getitem__ and boolean_index(args[1])):
            self.reads.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def boolean_index(index) -> bool:
    return any(
        isinstance(part, torch.Tensor) and part.dtype == torch.bool
        for part in (index if isinstance(index, tuple) else (index,))
    )

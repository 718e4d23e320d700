"""Checkpoints are safe to open: weights only as safetensors, nothing of ours unpickles, and the code shipped next to
the weights (run by `trust_remote_code=True`) is byte for byte the package's own model folder.

Trainer's checkpoints also hold Trainer's own state, written with `torch.save` (pickles): optimizer.pt,
scheduler.pt, rng_state.pth (scaler.pt with fp16 on an accelerator) and training_args.bin. In Transformers 5.23
Trainer reads the first four back only with `torch.load(..., weights_only=True)` (checked below by resuming a
run) and never reads training_args.bin; hf_encoders reads none of them itself.
"""

import ast
import inspect
import json
import pickle
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from transformers import Trainer, TrainingArguments

import hf_encoders
from tests.helpers import auto_map_classes
from tests.method_specs import TINY_CONFIGS, tiny_pretraining_model
from tests.tiny_models import CountingExamples, tiny_tacl_config

PACKAGE = Path(hf_encoders.__file__).parent
SAFE_SUFFIXES = {".json", ".safetensors", ".py", ".md", ".txt"}
TRAINER_STATE_PICKLES = {"optimizer.pt", "scheduler.pt", "rng_state.pth", "scaler.pt", "training_args.bin"}
BANNED_MODULES = {"pickle", "_pickle", "cPickle", "dill", "cloudpickle", "shelve", "joblib", "marshal"}
TORCH_LOADS = {"torch.load", "torch.serialization.load"}
TORCH_SAVES = {"torch.save", "torch.serialization.save"}


pytestmark = pytest.mark.usefixtures("one_thread")


def is_pickle(path: Path) -> bool:
    """torch.save's zip container, or a bare pickle (protocol 2+ opens with 0x80), whatever the file is called."""
    head = path.read_bytes()[:4]
    return head == b"PK\x03\x04" or head[:1] == b"\x80"


def check_weights_are_safetensors(folder: Path, model: torch.nn.Module, allowed_pickles=frozenset()) -> None:
    files = {path.name: path for path in folder.iterdir() if path.is_file()}
    pickles = {name for name, path in files.items() if is_pickle(path)}
    assert pickles <= allowed_pickles, f"pickled files in {folder}: {sorted(pickles - allowed_pickles)}"
    others = {name for name in files if name not in allowed_pickles and Path(name).suffix not in SAFE_SUFFIXES}
    assert not others, f"unexpected files in {folder}: {sorted(others)}"
    assert "model.safetensors" in files, sorted(files)
    with safe_open(folder / "model.safetensors", framework="pt") as weights:
        saved = set(weights.keys())
    # Every parameter and buffer is in the safetensors file, except the ones tied to another saved weight.
    expected = set(model.state_dict()) - set(getattr(model, "all_tied_weights_keys", {}) or {})
    assert expected <= saved, f"weights missing from model.safetensors: {sorted(expected - saved)[:5]}"


def check_code_is_the_model_folder(folder: Path, model: torch.nn.Module) -> None:
    """The .py files next to the weights are exactly the model folder's (its __init__ aside), byte-identical, and
    the config's auto_map points into them."""
    source = Path(inspect.getfile(type(model))).parent
    expected = {path.name for path in source.glob("*.py")} - {"__init__.py"}
    written = {path.name for path in folder.glob("*.py")}
    assert written == expected, f"{folder}: code files {sorted(written)}, the model folder has {sorted(expected)}"
    for name in expected:
        assert (folder / name).read_bytes() == (source / name).read_bytes(), f"{name} differs from {source / name}"
    auto_map = json.loads((folder / "config.json").read_text())["auto_map"]
    assert {reference.split(".")[0] + ".py" for reference in auto_map.values()} <= written


def model_classes() -> list[tuple[str, str]]:
    """(model type, class name) for every class in every method's auto_map."""
    pairs = []
    for model_type, make_config in sorted(TINY_CONFIGS.items()):
        for _, model_class in auto_map_classes(make_config()):
            if (model_type, model_class.__name__) not in pairs:
                pairs.append((model_type, model_class.__name__))
    return pairs


@pytest.mark.parametrize("model_type, class_name", model_classes(), ids=[name for _, name in model_classes()])
def test_save_pretrained_writes_safetensors_and_the_model_folder(tmp_path, model_type, class_name):
    torch.manual_seed(0)
    model = getattr(hf_encoders, class_name)(TINY_CONFIGS[model_type]())
    model.save_pretrained(tmp_path)
    check_weights_are_safetensors(tmp_path, model)
    check_code_is_the_model_folder(tmp_path, model)


def test_tacl_student_is_saved_as_safetensors(tmp_path):
    model = hf_encoders.TaclForPreTraining(tiny_tacl_config())
    model.save_student(tmp_path)
    check_weights_are_safetensors(tmp_path, model.student)
    assert not list(tmp_path.glob("*.py")), "a plain BERT student needs no remote code"


@pytest.mark.parametrize("method", sorted(TINY_CONFIGS))
def test_trainer_checkpoints_hold_safetensors_weights_and_the_model_folder(tmp_path, method):
    model = tiny_pretraining_model(method)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        use_cpu=True,
        per_device_train_batch_size=4,
        max_steps=2,
        save_steps=2,
        report_to=[],
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=CountingExamples(method, size=8))
    trainer.train()
    checkpoint = tmp_path / "checkpoint-2"
    check_weights_are_safetensors(checkpoint, model, allowed_pickles=TRAINER_STATE_PICKLES)
    assert {"optimizer.pt", "scheduler.pt", "rng_state.pth"} <= {path.name for path in checkpoint.iterdir()}
    check_code_is_the_model_folder(checkpoint, model)
    trainer.save_model(tmp_path / "final")
    check_weights_are_safetensors(tmp_path / "final", model, allowed_pickles={"training_args.bin"})
    check_code_is_the_model_folder(tmp_path / "final", model)


# ---- no unpickling in the source ----


def qualified_names(tree: ast.AST) -> dict[str, str]:
    """Local name -> what it was imported as (`import torch as t` gives t -> torch, `from torch import load`
    gives load -> torch.load), from every import in the module."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def keyword_is(call: ast.Call, name: str, value) -> bool:
    return any(k.arg == name and isinstance(k.value, ast.Constant) and k.value.value is value for k in call.keywords)


def unsafe_serialization(source: str) -> list[str]:
    """Problems in `source`, as "line: what": `torch.load` without `weights_only=True`, `torch.save`,
    `numpy.load(allow_pickle=True)` and any import of a pickling module. Parsed, not grepped: comments and strings
    do not count."""
    tree = ast.parse(source)
    names = qualified_names(tree)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            problems += [f"{node.lineno}: imports {m}" for m in modules if m.split(".")[0] in BANNED_MODULES]
        if not isinstance(node, ast.Call) or (name := dotted(node.func)) is None:
            continue
        root, _, rest = name.partition(".")
        name = ".".join(filter(None, [names.get(root, root), rest]))
        if name in TORCH_LOADS and not keyword_is(node, "weights_only", True):
            problems.append(f"{node.lineno}: {name} without weights_only=True")
        if name in TORCH_SAVES:
            problems.append(f"{node.lineno}: {name} writes a pickle; save tensors with safetensors")
        if name == "numpy.load" and keyword_is(node, "allow_pickle", True):
            problems.append(f"{node.lineno}: numpy.load with allow_pickle=True")
        dynamic_import = name in {"importlib.import_module", "__import__"} and node.args
        if (
            dynamic_import
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).split(".")[0] in BANNED_MODULES
        ):
            problems.append(f"{node.lineno}: imports {node.args[0].value}")
    return problems


def test_the_scanner_sees_through_aliases_and_ignores_comments():
    flagged = {
        "import torch\ntorch.load(f)": "without weights_only=True",
        "import torch\ntorch.load(f, weights_only=False)": "without weights_only=True",
        "import torch as t\nt.load(f)": "without weights_only=True",
        "from torch import load\nload(f, map_location='cpu')": "without weights_only=True",
        "import torch.serialization\ntorch.serialization.load(f)": "without weights_only=True",
        "import torch\ntorch.save(state, 'x.pt')": "writes a pickle",
        "import numpy as np\nnp.load(f, allow_pickle=True)": "allow_pickle",
        "import pickle": "imports pickle",
        "from dill import loads": "imports dill",
        "import importlib\nimportlib.import_module('cloudpickle')": "imports cloudpickle",
    }
    for source, problem in flagged.items():
        found = unsafe_serialization(source)
        assert len(found) == 1 and problem in found[0], (source, found)
    clean = "import torch\n# torch.load(f)\ntext = 'import pickle; torch.load(f)'\ntorch.load(f, weights_only=True)\n"
    assert unsafe_serialization(clean) == []


def test_no_module_of_ours_unpickles_or_pickles():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 20
    problems = [
        f"{path.relative_to(PACKAGE.parent)}:{problem}"
        for path in modules
        for problem in unsafe_serialization(path.read_text())
    ]
    assert not problems, "\n".join(problems)


def test_resuming_reads_trainers_own_pickles_with_weights_only(tmp_path, monkeypatch):
    """What the module docstring promises about Trainer's optimizer.pt / scheduler.pt / rng_state.pth / scaler.pt,
    checked by resuming a run with the installed Transformers: every file it reads back goes through
    `torch.load(..., weights_only=True)`, nothing is unpickled in full, and training_args.bin is never read."""
    args = TrainingArguments(
        output_dir=str(tmp_path),
        use_cpu=True,
        per_device_train_batch_size=4,
        max_steps=2,
        save_steps=1,
        report_to=[],
        disable_tqdm=True,
    )
    Trainer(model=tiny_pretraining_model("mae_lm"), args=args, train_dataset=CountingExamples(size=8)).train()

    loads, unpicklers = [], []
    original_load = torch.load

    def recording_load(file, *args, **kwargs):
        loads.append((Path(file).name, kwargs.get("weights_only")))
        return original_load(file, *args, **kwargs)

    class RecordingUnpickler(pickle.Unpickler):  # what torch.load(weights_only=False) and pickle.load use
        def __init__(self, *args, **kwargs):
            unpicklers.append(args)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(torch, "load", recording_load)
    monkeypatch.setattr(pickle, "Unpickler", RecordingUnpickler)
    resumed = Trainer(model=tiny_pretraining_model("mae_lm"), args=args, train_dataset=CountingExamples(size=8))
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-1"))
    assert resumed.state.global_step == 2
    read = {name for name, _ in loads}
    assert {"optimizer.pt", "scheduler.pt", "rng_state.pth"} <= read, f"Trainer no longer reads its state: {loads}"
    assert all(weights_only is True for _, weights_only in loads), loads
    assert "training_args.bin" not in read
    assert not unpicklers, f"something unpickled in full: {unpicklers}"

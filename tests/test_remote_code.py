"""Every class of every model type round-trips through save_pretrained and an Auto class in a fresh process that
never imports hf_encoders (trust_remote_code=True, offline, cwd outside the repository), and in-process without
trust_remote_code once hf_encoders is imported."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from tests.tiny_models import TINY_CONFIGS, sample_batch

# Loads every (auto class, checkpoint) pair, runs the shared batch, and writes outputs for the parent to compare.
FRESH_PROCESS_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch, transformers
    from safetensors.torch import load_file, save_file

    jobs = json.load(open(sys.argv[1]))
    batch = load_file(sys.argv[2])
    results = {}
    for index, (auto_class, path) in enumerate(jobs):
        model = getattr(transformers, auto_class).from_pretrained(path, trust_remote_code=True).eval()
        with torch.no_grad():
            output = model(**batch)
        first = output.logits if getattr(output, "logits", None) is not None else output.to_tuple()[0]
        results[f"{index}"] = first.contiguous()
        results[f"{index}.auto_map"] = torch.tensor([len(model.config.auto_map)])
    assert "hf_encoders" not in sys.modules, "the fresh process imported hf_encoders"
    save_file(results, sys.argv[3])
    """
)


def family_classes(model_type):
    """(auto class name, our class) for every entry of the family's auto_map."""
    config = TINY_CONFIGS[model_type]()
    import hf_encoders

    pairs = []
    for auto_class, reference in type(config).default_auto_map.items():
        if auto_class != "AutoConfig":
            pairs.append((auto_class, getattr(hf_encoders, reference.split(".")[-1])))
    return config, pairs


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
    and return its outputs on `batch`."""
    save_file(batch, tmp_path / "batch.safetensors")
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    completed = fresh_interpreter(
        FRESH_PROCESS_SCRIPT,
        [str(tmp_path / "jobs.json"), str(tmp_path / "batch.safetensors"), str(tmp_path / "out.safetensors")],
        tmp_path,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return load_file(tmp_path / "out.safetensors")


def model_folder_files(model_class):
    """The code a checkpoint must carry: exactly the files of the family's model folder."""
    folder = Path(sys.modules[model_class.__module__].__file__).parent
    return {p.name for p in folder.glob("*.py")} - {"__init__.py"}


def first_output(output):
    return output.logits if getattr(output, "logits", None) is not None else output.to_tuple()[0]


@pytest.mark.parametrize("model_type", sorted(TINY_CONFIGS))
def test_every_class_loads_in_a_fresh_process(model_type, tmp_path):
    config, pairs = family_classes(model_type)
    batch = sample_batch()
    torch.manual_seed(0)
    jobs, expected = [], []
    for auto_class, model_class in pairs:
        path = tmp_path / auto_class
        model = model_class(config).eval()
        model.save_pretrained(path)
        with torch.no_grad():
            expected.append(first_output(model(**batch)))
        jobs.append((auto_class, str(path)))
        saved_config = json.loads((path / "config.json").read_text())
        assert saved_config["auto_map"] == type(config).default_auto_map, "config.json must carry the FULL auto_map"
        assert not list(path.glob("*.bin")) and (path / "model.safetensors").exists()
        assert {p.name for p in path.glob("*.py")} == model_folder_files(model_class)

    results = run_in_fresh_process(jobs, batch, tmp_path)
    for index, (auto_class, _) in enumerate(jobs):
        torch.testing.assert_close(results[f"{index}"], expected[index], msg=f"{auto_class} differs after reload")
        assert int(results[f"{index}.auto_map"]) == len(type(config).default_auto_map)


@pytest.mark.parametrize("model_type", sorted(TINY_CONFIGS))
def test_checkpoints_load_without_remote_code_once_imported(model_type, tmp_path):
    config, pairs = family_classes(model_type)
    batch = sample_batch()
    for auto_class, model_class in pairs:
        model = model_class(config).eval()
        model.save_pretrained(tmp_path / auto_class)
        reloaded = getattr(transformers, auto_class).from_pretrained(tmp_path / auto_class).eval()
        assert type(reloaded) is model_class
        with torch.no_grad():
            torch.testing.assert_close(first_output(reloaded(**batch)), first_output(model(**batch)))


def test_tacl_around_a_biphasic_student_names_what_to_install_and_its_export_loads_alone(tmp_path):
    """A TaCL checkpoint ships TaCL's code only, so a student of this package's own family is parsed only where
    hf_encoders is installed: a fresh process is told so (not transformers' list of every model type). The
    exported student carries its own code and loads anywhere."""
    import hf_encoders
    from tests.tiny_models import tiny_biphasic_config, tiny_tacl_config

    torch.manual_seed(0)
    model = hf_encoders.TaclForPreTraining(tiny_tacl_config(tiny_biphasic_config())).eval()
    model.save_pretrained(tmp_path / "tacl")
    model.save_student(tmp_path / "student")
    # In this process hf_encoders is imported, so the training state reloads as it is.
    reloaded = transformers.AutoModelForPreTraining.from_pretrained(tmp_path / "tacl")
    torch.testing.assert_close(reloaded.student.state_dict(), model.student.state_dict())

    script = (
        "import sys, transformers\n"
        "transformers.AutoModelForPreTraining.from_pretrained(sys.argv[1], trust_remote_code=True)\n"
    )
    completed = fresh_interpreter(script, [str(tmp_path / "tacl")], tmp_path)
    assert completed.returncode != 0
    assert "student is a 'biphasic' model" in completed.stderr and "pip install hf-encoders" in completed.stderr
    assert "Should contain one of" not in completed.stderr

    batch = sample_batch()
    results = run_in_fresh_process([("AutoModelForMaskedLM", str(tmp_path / "student"))], batch, tmp_path)
    masked_lm = hf_encoders.BiphasicEncoderForMaskedLM.from_pretrained(tmp_path / "student").eval()
    with torch.no_grad():
        torch.testing.assert_close(results["0"], masked_lm(**batch).logits)

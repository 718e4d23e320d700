"""Every class of every model type round-trips through save_pretrained and an Auto class in a fresh process that
never imports hf_encoders (trust_remote_code=True, offline, cwd outside the repository), and in-process without
trust_remote_code once hf_encoders is imported."""

import inspect
import json
from pathlib import Path

import pytest
import torch
import transformers

from tests.helpers import auto_map_classes, first_output, fresh_interpreter, model_folder_files, run_in_fresh_process
from tests.method_specs import TINY_CONFIGS
from tests.tiny_models import sample_batch, tiny_biphasic_config, tiny_tacl_config


def model_classes(model_type):
    """The method's tiny config, and (auto class name, our class) for every entry of its auto_map."""
    config = TINY_CONFIGS[model_type]()
    return config, auto_map_classes(config)


@pytest.mark.parametrize("model_type", sorted(TINY_CONFIGS))
def test_every_class_loads_in_a_fresh_process(model_type, tmp_path):
    config, pairs = model_classes(model_type)
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
        folder = Path(inspect.getfile(model_class)).parent
        for name in model_folder_files(model_class):  # plain files, the package's own (utils/check_copies.py)
            assert not (path / name).is_symlink(), name
            assert (path / name).read_bytes() == (folder / name).read_bytes(), f"the checkpoint's {name} differs"

    results = run_in_fresh_process(jobs, batch, tmp_path)
    for index, (auto_class, _) in enumerate(jobs):
        torch.testing.assert_close(results[f"{index}"], expected[index], msg=f"{auto_class} differs after reload")
        assert int(results[f"{index}.auto_map"]) == len(type(config).default_auto_map)


@pytest.mark.parametrize("model_type", sorted(TINY_CONFIGS))
def test_checkpoints_load_without_remote_code_once_imported(model_type, tmp_path):
    config, pairs = model_classes(model_type)
    batch = sample_batch()
    for auto_class, model_class in pairs:
        model = model_class(config).eval()
        model.save_pretrained(tmp_path / auto_class)
        reloaded = getattr(transformers, auto_class).from_pretrained(tmp_path / auto_class).eval()
        assert type(reloaded) is model_class
        with torch.no_grad():
            torch.testing.assert_close(first_output(reloaded(**batch)), first_output(model(**batch)))


def test_tacl_around_a_biphasic_student_names_what_to_install_and_its_export_loads_alone(tmp_path):
    """A TaCL checkpoint ships TaCL's code only, so a student of this package's own model type is parsed only where
    hf_encoders is installed: a fresh process is told so (not transformers' list of every model type). The
    exported student carries its own code and loads anywhere."""
    import hf_encoders

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

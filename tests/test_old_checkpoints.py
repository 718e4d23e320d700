"""Checkpoints written by hf-encoders 0.1.0 keep loading, with the numbers 0.1.0 computed.

tests/data/checkpoints_0_1 holds one tiny checkpoint per model, written by the 0.1.0 code (commit dadff72) with
`save_pretrained` (so each carries that version's model code and full auto_map) and the outputs that code
computed on a fixed batch (`expected.pt`); make_checkpoints.py there is the script that wrote them, kept for the
record, never to be re-run against newer code. Each checkpoint must load

* with `import hf_encoders`, through the Auto classes (no trust_remote_code) and the package's own classes;
* in a fresh process that never imports hf_encoders, with `trust_remote_code=True`, running the 0.1.0 code
  the checkpoint carries;

and give the stored outputs. 0.1.0 also recorded run state in the configs (`RUN_STATE`: a biphasic checkpoint
saved during the CLM phase says `objective: "clm"`, MAE-LM's carries δ, TaCL's its starting encoder): the package
must read them as what the checkpoint is (a biphasic encoder is MLM by default) and drop that state when the
model is saved again.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import transformers

from tests.helpers import assert_close_at_real_tokens

CHECKPOINTS = Path(__file__).parent / "data" / "checkpoints_0_1"
ATOL = 1e-5

# folder -> [(Auto class, the package's class, forward kwargs, output fields)]; the same table as
# make_checkpoints.py's CASES, minus the biphasic pre-training default, which 0.1.0 took from config.objective.
CASES = {
    "mae_lm": [
        ("AutoModelForMaskedLM", "MaeLmForMaskedLM", {}, ("logits", "encoder_last_hidden_state")),
        ("AutoModel", "MaeLmModel", {}, ("last_hidden_state",)),
    ],
    "biphasic_clm_phase": [
        ("AutoModelForPreTraining", "BiphasicEncoderForPreTraining", {"objective": "clm"}, ("logits",)),
        ("AutoModelForPreTraining", "BiphasicEncoderForPreTraining", {"objective": "mlm"}, ("logits",)),
        ("AutoModelForMaskedLM", "BiphasicEncoderForMaskedLM", {}, ("logits",)),
        ("AutoModel", "BiphasicEncoder", {}, ("last_hidden_state",)),
    ],
    "biphasic_classifier": [
        ("AutoModelForSequenceClassification", "BiphasicEncoderForSequenceClassification", {}, ("logits",)),
    ],
    "tacl": [
        (
            "AutoModelForPreTraining",
            "TaclForPreTraining",
            {},
            ("logits", "seq_relationship_logits", "last_hidden_state"),
        ),
    ],
}
# In the 0.1.0 code the checkpoint carries, the pre-training model's default objective is its config's "clm".
OLD_DEFAULT = {"biphasic_clm_phase": [("AutoModelForPreTraining", "BiphasicEncoderForPreTraining", {}, ("logits",))]}


def output_key(auto_class: str, forward_kwargs: dict, field: str) -> str:
    """make_checkpoints.py's key: 'AutoModelForPreTraining(objective=mlm).logits'."""
    arguments = ",".join(f"{name}={value}" for name, value in sorted(forward_kwargs.items()))
    return f"{auto_class}({arguments}).{field}" if arguments else f"{auto_class}.{field}"


def expected_outputs(name: str) -> dict[str, torch.Tensor]:
    return torch.load(CHECKPOINTS / name / "expected.pt", weights_only=True)


def input_batch(expected: dict) -> dict[str, torch.Tensor]:
    return {"input_ids": expected["input_ids"], "attention_mask": expected["attention_mask"]}


def copy_checkpoint(name: str, tmp_path: Path) -> Path:
    """A copy outside the repository, without expected.pt: nothing a load writes can land in tests/data."""
    return Path(shutil.copytree(CHECKPOINTS / name, tmp_path / name, ignore=shutil.ignore_patterns("expected.pt")))


def run_forward(model, batch: dict, forward_kwargs: dict):
    with torch.no_grad():
        return model.eval()(**batch, **forward_kwargs)


def assert_outputs(output, expected: dict, auto_class: str, forward_kwargs: dict, fields, how: str) -> None:
    """0.1.0 computed states at padding; the package now drops padding and leaves zeros there."""
    for field in fields:
        key = output_key(auto_class, forward_kwargs, field)
        assert_close_at_real_tokens(
            output[field],
            expected[key],
            expected["attention_mask"],
            rtol=0,
            atol=ATOL,
            msg=lambda m, key=key: f"{key} ({how}): {m}",
        )


def test_the_frozen_checkpoints_are_complete():
    """Every folder the table names is there, with its weights, its 0.1.0 code and a tokenizer that loads."""
    assert sorted(CASES) == sorted(p.name for p in CHECKPOINTS.iterdir() if p.is_dir() and p.name != "__pycache__")
    for name in CASES:
        folder = CHECKPOINTS / name
        config = json.loads((folder / "config.json").read_text())
        assert config["auto_map"] and (folder / "model.safetensors").exists()
        for reference in config["auto_map"].values():
            assert (folder / f"{reference.split('.')[0]}.py").exists(), f"{name} lacks the code of {reference}"
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        assert tokenizer("w5 [MASK] w63")["input_ids"] == [5, 4, 63]


@pytest.mark.parametrize("name", sorted(CASES))
def test_old_checkpoint_loads_with_the_package(name, tmp_path):
    import hf_encoders

    folder = copy_checkpoint(name, tmp_path)
    expected = expected_outputs(name)
    batch = input_batch(expected)
    for auto_class, class_name, forward_kwargs, fields in CASES[name]:
        package_class = getattr(hf_encoders, class_name)
        through_auto = getattr(transformers, auto_class).from_pretrained(folder)
        assert type(through_auto) is package_class, f"{auto_class} gave {type(through_auto)}, not the package's class"
        assert_outputs(
            run_forward(through_auto, batch, forward_kwargs), expected, auto_class, forward_kwargs, fields, auto_class
        )
        own = package_class.from_pretrained(folder)
        assert_outputs(
            run_forward(own, batch, forward_kwargs), expected, auto_class, forward_kwargs, fields, class_name
        )


# Loads every checkpoint's jobs with trust_remote_code, runs the batch, and writes the outputs under
# make_checkpoints.py's keys; a checkpoint that fails is reported by name and does not stop the others.
FRESH_PROCESS_SCRIPT = textwrap.dedent(
    """
    import json, sys, traceback
    import torch, transformers

    work = json.loads(open(sys.argv[1]).read())
    results, errors = {}, {}
    for name, (batch_path, jobs) in work.items():
        try:
            batch = torch.load(batch_path, weights_only=True)
            for auto_class, folder, forward_kwargs, fields, keys in jobs:
                model = getattr(transformers, auto_class).from_pretrained(folder, trust_remote_code=True).eval()
                assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
                with torch.no_grad():
                    output = model(**batch, **forward_kwargs)
                for field, key in zip(fields, keys):
                    results[f"{name}/{key}"] = output[field].contiguous()
        except Exception:
            errors[name] = traceback.format_exc()
    assert "hf_encoders" not in sys.modules, "the fresh process imported hf_encoders"
    torch.save(results, sys.argv[2])
    open(sys.argv[3], "w").write(json.dumps(errors))
    """
)


@pytest.fixture(scope="module")
def fresh_process_outputs(tmp_path_factory):
    """One interpreter for every checkpoint (starting one costs seconds): no hf_encoders, offline, cwd outside the
    repository, no PYTHONPATH, its own dynamic-modules cache. Returns ({checkpoint: {key: output}}, {checkpoint: error})."""
    tmp_path = tmp_path_factory.mktemp("fresh_process")
    work = {}
    for name, cases in CASES.items():
        folder = copy_checkpoint(name, tmp_path)
        torch.save(input_batch(expected_outputs(name)), tmp_path / f"{name}.batch.pt")
        jobs = [
            (
                auto_class,
                str(folder),
                forward_kwargs,
                fields,
                [output_key(auto_class, forward_kwargs, f) for f in fields],
            )
            for auto_class, _, forward_kwargs, fields in cases + OLD_DEFAULT.get(name, [])
        ]
        work[name] = (str(tmp_path / f"{name}.batch.pt"), jobs)
    (tmp_path / "work.json").write_text(json.dumps(work))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"), "PYTHONPATH": ""}
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            FRESH_PROCESS_SCRIPT,
            str(tmp_path / "work.json"),
            str(tmp_path / "out.pt"),
            str(tmp_path / "errors.json"),
        ],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = torch.load(tmp_path / "out.pt", weights_only=True)
    outputs = {name: {} for name in CASES}
    for key, value in results.items():
        name, _, output = key.partition("/")
        outputs[name][output] = value
    return outputs, json.loads((tmp_path / "errors.json").read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_old_checkpoint_loads_its_own_code_in_a_fresh_process(name, fresh_process_outputs):
    outputs, errors = fresh_process_outputs
    assert name not in errors, errors.get(name)
    expected = expected_outputs(name)
    keys = [
        output_key(auto_class, kwargs, f)
        for auto_class, _, kwargs, fields in CASES[name] + OLD_DEFAULT.get(name, [])
        for f in fields
    ]
    assert sorted(outputs[name]) == sorted(keys)
    for key in keys:
        torch.testing.assert_close(
            outputs[name][key], expected[key], rtol=0, atol=ATOL, msg=lambda m, key=key: f"{key} (remote code): {m}"
        )


@pytest.mark.parametrize("auto_class", ["AutoModelForPreTraining", "BiphasicEncoderForPreTraining"])
def test_clm_phase_checkpoint_is_a_masked_lm_by_default(auto_class, tmp_path):
    """The objective is the training run's, not the checkpoint's: loaded by the package, a checkpoint saved during
    the CLM phase computes the bidirectional masked-LM outputs unless told otherwise."""
    import hf_encoders

    loader = getattr(transformers, auto_class, None) or getattr(hf_encoders, auto_class)
    model = loader.from_pretrained(copy_checkpoint("biphasic_clm_phase", tmp_path))
    expected = expected_outputs("biphasic_clm_phase")
    logits = run_forward(model, input_batch(expected), {}).logits
    mlm_logits = expected["AutoModelForPreTraining(objective=mlm).logits"]
    assert_close_at_real_tokens(logits, mlm_logits, expected["attention_mask"], rtol=0, atol=ATOL)


# What 0.1.0 wrote into config.json that is run state, not what the checkpoint is: the biphasic phase and its masking
# ratio (a classifier's config too), MAE-LM's δ (now the collator's), the encoder TaCL started from.
RUN_STATE = {
    "biphasic_clm_phase": ("objective", "mlm_probability"),
    "biphasic_classifier": ("objective", "mlm_probability"),
    "mae_lm": ("mask_in_encoder_fraction",),
    "tacl": ("student_name_or_path",),
}


@pytest.mark.parametrize("name", sorted(RUN_STATE))
def test_resaving_an_old_checkpoint_drops_run_state(name, tmp_path):
    import hf_encoders

    _, class_name, *_ = CASES[name][0]
    folder = copy_checkpoint(name, tmp_path)
    assert set(RUN_STATE[name]) <= set(json.loads((folder / "config.json").read_text()))
    model = getattr(hf_encoders, class_name).from_pretrained(folder)
    model.save_pretrained(tmp_path / "resaved")
    config = json.loads((tmp_path / "resaved" / "config.json").read_text())
    assert not set(RUN_STATE[name]) & set(config), {key: config[key] for key in RUN_STATE[name] if key in config}


def test_an_mae_lm_checkpoint_carrying_delta_loads_as_delta_zero_and_says_where_delta_went(tmp_path, caplog):
    """δ != 0 in an old config: the package's model keeps no [MASK] in its encoder unless the batch says so (the
    0.1.0 outputs, computed at δ = 0, on a batch with [MASK]s), and loading warns once, naming the collator's
    argument."""
    import hf_encoders

    folder = copy_checkpoint("mae_lm", tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "mask_in_encoder_fraction": 0.25}))
    expected = expected_outputs("mae_lm")
    assert (expected["input_ids"] == config["mask_token_id"]).any()
    with caplog.at_level("WARNING"):
        model = transformers.AutoModelForMaskedLM.from_pretrained(folder)
    assert type(model) is hf_encoders.MaeLmForMaskedLM
    warnings = [
        record.getMessage() for record in caplog.records if "mask_in_encoder_fraction=0.25" in record.getMessage()
    ]
    assert len(warnings) == 1 and "DataCollatorForMaeLm(..., mask_in_encoder_fraction=...)" in warnings[0]
    fields = ("logits", "encoder_last_hidden_state")
    assert_outputs(run_forward(model, input_batch(expected), {}), expected, "AutoModelForMaskedLM", {}, fields, "δ")

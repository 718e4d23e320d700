"""`import hf_encoders` and `hf-encoders --help` load only what they use (bench/import_time.py times them), and the
Auto classes still know every family right after the import: each registers on its first lookup."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hf_encoders
from hf_encoders.families import FAMILIES

ROOT = Path(__file__).resolve().parents[1]
# What neither the import nor --help needs: seconds of imports between them.
HEAVY = ("torch", "transformers", "datasets", "matplotlib", "scipy", "sklearn", "peft", "accelerate")
# All of hf_encoders that they may import: the family table, registration, and the console script.
LIGHT = {"hf_encoders", "hf_encoders.cli", "hf_encoders.errors", "hf_encoders.families", "hf_encoders.registration"}

LOADED_MODULES = """
import json, sys
{statement}
print(json.dumps(sorted(sys.modules)))
"""

HELP = """
sys.argv = ["hf-encoders", "--help"]
from hf_encoders.cli import console
try:
    console()
except SystemExit as exit:
    assert exit.code == 0, exit.code
"""

REGISTRATION = """
import ast
import json
import hf_encoders
FIRST_IMPORT
import transformers
from hf_encoders.families import FAMILIES, load

wrong = []
for family in FAMILIES.values():
    if family.config is None:
        continue
    config_class = transformers.AutoConfig.for_model(family.model_type).__class__
    if config_class is not load(family.config):
        wrong.append(f"AutoConfig {family.model_type}: {config_class}")
    folder = sys.modules[config_class.__module__.rpartition(".")[0]]
    for auto_class, reference in config_class.default_auto_map.items():
        if auto_class == "AutoConfig":
            continue
        ours = getattr(folder, reference.rpartition(".")[2])
        found = getattr(transformers, auto_class)._model_mapping.get(config_class, None)
        if found is not ours:
            wrong.append(f"{auto_class} {family.model_type}: {found}")
print(json.dumps(wrong))
"""

DIRECT_IMPORT = """
import ast
import json
import hf_encoders
from transformers import AutoConfig, AutoModel, BertConfig

AutoConfig.for_model("bert")
assert BertConfig in AutoModel._model_mapping
untouched = not any(name.startswith("hf_encoders.models") for name in sys.modules)
# A family imported by its own path, as the recipes do, with no Auto lookup: save_pretrained must still ship its code.
from hf_encoders.models.tacl import TaclConfig, TaclForPreTraining
# Listing an Auto table lists every family, the ones not imported yet too.
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from hf_encoders.families import FAMILIES
listed = sorted(set(CONFIG_MAPPING.keys()) & {family.model_type for family in FAMILIES.values() if family.config})
print(json.dumps([untouched, TaclConfig._auto_class, TaclForPreTraining._auto_class, listed]))
"""


def run_fresh(script: str) -> str:
    """stdout of `script` in a new interpreter that imports this checkout's hf_encoders."""
    result = subprocess.run(
        [sys.executable, "-c", "import sys\n" + script],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def loaded_modules(statement: str) -> list[str]:
    return json.loads(run_fresh(LOADED_MODULES.format(statement=statement)).splitlines()[-1])


@pytest.mark.parametrize("statement", ["import hf_encoders", HELP], ids=["import", "help"])
def test_the_import_and_help_load_no_framework_and_no_subcommand(statement):
    modules = loaded_modules(statement)
    assert [name for name in modules if name.split(".")[0] in HEAVY] == []
    assert {name for name in modules if name.startswith("hf_encoders")} <= LIGHT


def test_help_still_lists_every_subcommand():
    from hf_encoders.cli import SUBCOMMANDS

    usage = run_fresh(HELP)
    assert all(name in usage for name in SUBCOMMANDS), usage


# However transformers' Auto modules are first imported after ours: `from transformers import AutoModelFor...` loads
# configuration_auto while auto_factory is half-initialised (the demo crashed there once).
FIRST_IMPORTS = [
    "import transformers",
    "from transformers import AutoConfig",
    "from transformers import AutoModelForSequenceClassification, Trainer",
    "import transformers.models.auto.modeling_auto",
]


@pytest.mark.parametrize("first_import", FIRST_IMPORTS)
def test_every_auto_class_finds_every_family_right_after_the_import(first_import):
    assert json.loads(run_fresh(REGISTRATION.replace("FIRST_IMPORT", first_import)).splitlines()[-1]) == []


def test_other_models_import_no_family_and_a_family_imported_directly_ships_its_code():
    untouched, config_auto_class, model_auto_class, listed = json.loads(run_fresh(DIRECT_IMPORT).splitlines()[-1])
    assert untouched, "looking up bert imported a family of ours"
    assert (config_auto_class, model_auto_class) == ("AutoConfig", "AutoModelForPreTraining")
    assert listed == sorted(family.model_type for family in FAMILIES.values() if family.config)


@pytest.mark.parametrize("name", hf_encoders.__all__)
def test_every_public_name_imports(name):
    namespace = {}
    exec(f"from hf_encoders import {name}", namespace)
    assert namespace[name] is getattr(hf_encoders, name)
    assert name in dir(hf_encoders)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'hf_encoders' has no attribute 'MaeLmForCausalLM'"):
        hf_encoders.MaeLmForCausalLM  # noqa: B018


def test_the_type_checkers_imports_match_the_lazy_names():
    """The `if TYPE_CHECKING:` imports of hf_encoders/__init__.py, what type checkers and IDEs read, are the lazy names
    one for one: a name added to one list only would be unseen by type checkers or fail at run time."""
    tree = ast.parse(Path(hf_encoders.__file__).read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    imported = {
        ("." * node.level + node.module, alias.name)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert imported == {(module, name) for module, names in hf_encoders._LAZY_NAMES.items() for name in names}


def test_the_plotting_modules_leave_matplotlibs_backend_alone():
    script = """
import json
import matplotlib
backend = dict.__getitem__(matplotlib.rcParams, "backend")  # unresolved: reading it the usual way would pick one
import hf_encoders.evaluation.report, hf_encoders.training.loss_curves
print(json.dumps([dict.__getitem__(matplotlib.rcParams, "backend") == backend, "matplotlib.pyplot" in sys.modules]))
"""
    assert json.loads(run_fresh(script).splitlines()[-1]) == [True, False]

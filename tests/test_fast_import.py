"""`hf-encoders --help` loads no framework and none of the package (bench/import_time.py times it), `import hf_encoders`
loads the models it registers and not the training stack, and right after the import every Auto class knows every
method's model classes, registered through transformers' public API."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hf_encoders
from hf_encoders.methods import METHODS

ROOT = Path(__file__).resolve().parents[1]
# What `--help` needs none of: seconds of imports.
FRAMEWORKS = ("torch", "transformers", "datasets", "matplotlib", "scipy", "sklearn", "peft", "accelerate")
# What `import hf_encoders` needs none of: the training stack, loaded when a collator, callback or command is used
# (transformers' modeling code imports scipy and accelerate itself).
TRAINING_STACK = ("datasets", "matplotlib", "sklearn", "peft", "transformers.trainer")

LOADED_MODULES = """
import json, sys
{statement}
print(json.dumps(sorted(sys.modules)))
"""

HELP = """
sys.argv = ["hf-encoders", "--help"]
from hf_encoders_cli import console
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
from hf_encoders.methods import METHODS, load

wrong = []
for method in METHODS.values():
    if method.config is None:
        continue
    config_class = transformers.AutoConfig.for_model(method.model_type).__class__
    if config_class is not load(method.config):
        wrong.append(f"AutoConfig {method.model_type}: {config_class}")
    folder = sys.modules[config_class.__module__.rpartition(".")[0]]
    for auto_class, reference in config_class.default_auto_map.items():
        if auto_class == "AutoConfig":
            continue
        ours = getattr(folder, reference.rpartition(".")[2])
        found = getattr(transformers, auto_class)._model_mapping.get(config_class, None)
        if found is not ours:
            wrong.append(f"{auto_class} {method.model_type}: {found}")
        # Marked for save_pretrained, which then ships the folder: for one of the Auto classes that name it.
        if config_class.default_auto_map.get(ours._auto_class, "").rpartition(".")[2] != ours.__name__:
            wrong.append(f"{ours.__name__} is marked for {ours._auto_class}")
    if config_class._auto_class != "AutoConfig":
        wrong.append(f"{config_class.__name__} is marked for {config_class._auto_class}")
print(json.dumps(wrong))
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


def test_help_loads_no_framework_and_none_of_the_package():
    modules = loaded_modules(HELP)
    assert [name for name in modules if name.split(".")[0] in FRAMEWORKS] == []
    assert [name for name in modules if name.split(".")[0] == "hf_encoders"] == []


def test_the_import_loads_the_models_and_not_the_training_stack():
    modules = loaded_modules("import hf_encoders")
    assert [name for name in modules if name.startswith(TRAINING_STACK)] == []
    loaded_models = {name for name in modules if name.startswith("hf_encoders.models.")}
    assert {f"hf_encoders.models.{method.model_type}" for method in METHODS.values() if method.config} <= loaded_models


def test_help_still_lists_every_subcommand_and_method():
    from hf_encoders_cli import SUBCOMMANDS

    usage = run_fresh(HELP)
    assert all(name in usage for name in SUBCOMMANDS), usage
    assert all(name in usage for name in METHODS), usage


# However transformers' Auto modules are first imported after ours: `from transformers import AutoModelFor...` loads
# configuration_auto while auto_factory is half-initialised (the demo crashed there once).
FIRST_IMPORTS = [
    "import transformers",
    "from transformers import AutoConfig",
    "from transformers import AutoModelForSequenceClassification, Trainer",
    "import transformers.models.auto.modeling_auto",
]


@pytest.mark.parametrize("first_import", FIRST_IMPORTS)
def test_every_auto_class_finds_every_method_right_after_the_import(first_import):
    assert json.loads(run_fresh(REGISTRATION.replace("FIRST_IMPORT", first_import)).splitlines()[-1]) == []


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

"""The 0.2 import paths that 0.3 moved keep working for one release: each warns (FutureWarning, naming where to import
from instead) and gives the very objects of their new home."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# {old module: (new module, names that must be the new module's own)}.
MOVED_MODULES = {
    "hf_encoders.families": (
        "hf_encoders.methods",
        {
            "FAMILIES": "METHODS",
            "Family": "Method",
            "get_family": "get_method",
            "family_of_model_type": "method_of_model_type",
        },
    ),
    "hf_encoders.cli": ("hf_encoders_cli", {"main": "main", "console": "console", "SUBCOMMANDS": "SUBCOMMANDS"}),
    "hf_encoders.data.mae_lm_collator": ("hf_encoders.methods.mae_lm.collator", {"DataCollatorForMaeLm": ""}),
    "hf_encoders.data.tacl_collator": (
        "hf_encoders.methods.tacl.collator",
        {"DataCollatorForTacl": "", "DataCollatorForTaCL": "DataCollatorForTacl"},
    ),
    "hf_encoders.data.biphasic_collator": ("hf_encoders.methods.biphasic.collator", {"next_token_labels": ""}),
    "hf_encoders.data.sentence_pairs": ("hf_encoders.methods.tacl.sentence_pairs", {"build_sentence_pairs": ""}),
    "hf_encoders.data.errors": ("hf_encoders.errors", {"CorpusError": "", "TokenizerLoadError": ""}),
    "hf_encoders.training.conversion": ("hf_encoders.methods.biphasic.conversion", {"convert_causal_lm": ""}),
    "hf_encoders.training.mae_lm_conversion": ("hf_encoders.methods.mae_lm.conversion", {"from_encoder": ""}),
    "hf_encoders.training.encoder_hold": ("hf_encoders.methods.mae_lm.encoder_hold", {"EncoderHoldCallback": ""}),
    "hf_encoders.training.phases": ("hf_encoders.methods.biphasic.phases", {"PhaseScheduleCallback": ""}),
}
# {(module, old name): (new module, new name)}: names that moved out of a module that stays.
MOVED_NAMES = {
    ("hf_encoders", "FAMILIES"): ("hf_encoders.methods", "METHODS"),
    ("hf_encoders", "Family"): ("hf_encoders.methods", "Method"),
    ("hf_encoders", "register_families"): ("hf_encoders.registration", "register_methods"),
    ("hf_encoders", "DataCollatorForTaCL"): ("hf_encoders.methods.tacl.collator", "DataCollatorForTacl"),
    ("hf_encoders.training.callbacks", "EncoderHoldCallback"): (
        "hf_encoders.methods.mae_lm.encoder_hold",
        "EncoderHoldCallback",
    ),
    ("hf_encoders.training.callbacks", "PhaseScheduleCallback"): (
        "hf_encoders.methods.biphasic.phases",
        "PhaseScheduleCallback",
    ),
    ("hf_encoders.export", "export_student"): ("hf_encoders.methods.tacl.export", "export_student"),
    ("hf_encoders.export", "to_eurobert"): ("hf_encoders.methods.biphasic.export", "to_eurobert"),
    ("hf_encoders.export", "export_biphasic"): ("hf_encoders.methods.biphasic.export", "export_biphasic"),
}

SCRIPT = """
import importlib, json, sys, warnings
moved_modules, moved_names = json.loads(sys.argv[1]), json.loads(sys.argv[2])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import hf_encoders
found = {"import hf_encoders": [[str(w.message) for w in caught if w.category is FutureWarning], True]}
for old, (new, names) in moved_modules.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    target = importlib.import_module(new)
    same = all(getattr(module, name) is getattr(target, new_name or name) for name, new_name in names.items())
    found[old] = [[str(w.message) for w in caught if w.category is FutureWarning], same]
for old_module, old_name, new_module, new_name in moved_names:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(importlib.import_module(old_module), old_name)
    same = value is getattr(importlib.import_module(new_module), new_name)
    found[f"{old_module}.{old_name}"] = [[str(w.message) for w in caught if w.category is FutureWarning], same]
print(json.dumps(found))
"""


def test_every_moved_path_warns_and_gives_the_new_objects():
    names = [[*old, *new] for old, new in MOVED_NAMES.items()]
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(MOVED_MODULES), json.dumps(names)],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.splitlines()[-1])
    assert found.pop("import hf_encoders") == [[], True], "the package's own import warns nothing"
    for old, (new, _) in MOVED_MODULES.items():
        messages, same = found[old]
        assert same, f"{old} does not give {new}'s objects"
        assert len(messages) == 1 and old in messages[0] and "goes in 0.4" in messages[0] and new in messages[0], old
    for (old_module, old_name), (new_module, new_name) in MOVED_NAMES.items():
        messages, same = found[f"{old_module}.{old_name}"]
        assert same, f"{old_module}.{old_name} is not {new_module}.{new_name}"
        assert any(new_name in message and "goes in 0.4" in message for message in messages), (old_name, messages)

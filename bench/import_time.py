"""What a user waits for before anything runs: `hf-encoders --help` and `import hf_encoders`, each timed in a fresh
interpreter (wall clock, the interpreter's start included), runs of the commands interleaved.

    python bench/import_time.py                  # median of 7 runs of each

Targets (on a quiet 2-core machine): `hf-encoders --help` <= 1.5 s (the script lives beside the package and imports
none of it), and `import hf_encoders`, which registers every model with transformers' Auto classes, adds at most
0.5 s to importing what that needs: torch, transformers' Auto model classes and the modeling code our models build
on (Llama's). Where the time goes: `python -X importtime -c "import hf_encoders"`.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HELP = "import sys; sys.argv = ['hf-encoders', '--help']; from hf_encoders_cli import console; console()"
FRAMEWORKS = "import torch, transformers' Auto and Llama modeling"
COMMANDS = {
    "python (nothing imported)": "pass",
    "hf-encoders --help": HELP,
    FRAMEWORKS: "import torch, transformers; transformers.AutoModel; import transformers.models.llama.modeling_llama",
    "import hf_encoders": "import hf_encoders",
}
HELP_TARGET = 1.5  # seconds
ADDED_TARGET = 0.5  # seconds on top of the frameworks' imports


def seconds(code: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="fresh-interpreter runs of each command")
    args = parser.parse_args()
    runs: dict[str, list[float]] = {label: [] for label in COMMANDS}
    for code in COMMANDS.values():  # a warm-up run each: the first reads the files from disk
        seconds(code)
    for _ in range(args.repeats):
        for label, code in COMMANDS.items():
            runs[label].append(seconds(code))
    median = {label: statistics.median(values) for label, values in runs.items()}
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"median of {args.repeats} fresh interpreters; {os.cpu_count()} cores, load average {load}")
    print("| command | median s | min s | max s |")
    print("|---|---|---|---|")
    for label, values in runs.items():
        print(f"| `{label}` | {median[label]:.2f} | {min(values):.2f} | {max(values):.2f} |")
    # The median of the differences of runs taken side by side: less sensitive to the machine's load changing.
    added = statistics.median(ours - alone for ours, alone in zip(runs["import hf_encoders"], runs[FRAMEWORKS]))
    help_met = "yes" if median["hf-encoders --help"] <= HELP_TARGET else "NO"
    added_met = "yes" if added <= ADDED_TARGET else "NO"
    print(f"hf-encoders --help: {median['hf-encoders --help']:.2f} s (target <= {HELP_TARGET} s, met: {help_met})")
    print(f"import hf_encoders adds {added:+.2f} s to the frameworks' (target <= {ADDED_TARGET} s, met: {added_met})")


if __name__ == "__main__":
    main()

"""What a user waits for before anything runs: `import hf_encoders` and `hf-encoders --help`, each timed in a fresh
interpreter (wall clock, the interpreter's start included), runs of the commands interleaved.

    python bench/import_time.py                  # median of 7 runs of each
    python bench/import_time.py --first_lookup   # and the cost the import defers

Targets (on a quiet 2-core machine): `hf-encoders --help` <= 1.5 s, and `import hf_encoders` adds at most 0.5 s to
`import transformers`. With --first_lookup, a last row times what importing hf_encoders defers: the first Auto lookup
of one of its model types imports that family (torch and transformers' modeling code, seconds). Where the time goes:
`python -X importtime -c "import hf_encoders"`.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HELP = "import sys; sys.argv = ['hf-encoders', '--help']; from hf_encoders.cli import console; console()"
COMMANDS = {
    "python (nothing imported)": "pass",
    "import transformers": "import transformers",
    "import transformers, hf_encoders": "import transformers, hf_encoders",
    "import hf_encoders": "import hf_encoders",
    "hf-encoders --help": HELP,
}
FIRST_LOOKUP = {
    "import hf_encoders + first Auto lookup": "import hf_encoders, transformers; transformers.AutoConfig.for_model('mae_lm')"
}
HELP_TARGET = 1.5  # seconds
ADDED_TARGET = 0.5  # seconds on top of `import transformers`


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
    parser.add_argument("--first_lookup", action="store_true", help="also time the first Auto lookup of a family")
    args = parser.parse_args()
    commands = {**COMMANDS, **(FIRST_LOOKUP if args.first_lookup else {})}
    runs: dict[str, list[float]] = {label: [] for label in commands}
    for code in commands.values():  # a warm-up run each: the first reads the files from disk
        seconds(code)
    for _ in range(args.repeats):
        for label, code in commands.items():
            runs[label].append(seconds(code))
    median = {label: statistics.median(values) for label, values in runs.items()}
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"median of {args.repeats} fresh interpreters; {os.cpu_count()} cores, load average {load}")
    print("| command | median s | min s | max s |")
    print("|---|---|---|---|")
    for label, values in runs.items():
        print(f"| `{label}` | {median[label]:.2f} | {min(values):.2f} | {max(values):.2f} |")
    # The median of the differences of runs taken side by side: less sensitive to the machine's load changing.
    added = statistics.median(
        both - alone for both, alone in zip(runs["import transformers, hf_encoders"], runs["import transformers"])
    )
    help_met = "yes" if median["hf-encoders --help"] <= HELP_TARGET else "NO"
    added_met = "yes" if added <= ADDED_TARGET else "NO"
    print(f"hf-encoders --help: {median['hf-encoders --help']:.2f} s (target <= {HELP_TARGET} s, met: {help_met})")
    print(f"import hf_encoders adds {added:+.2f} s to transformers' (target <= {ADDED_TARGET} s, met: {added_met})")


if __name__ == "__main__":
    main()

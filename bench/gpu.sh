#!/usr/bin/env bash
# What a lent GPU measures, in one call of under 8 minutes, compilation included (a session's device time is 15
# minutes, and a machine takes about a minute to start). Steps run in order of importance, each under its own time
# limit, so that a step cut short costs only what comes after it: MAE-LM's flex_attention checked against the dense
# eager bias; every method against its anchor at base size (12 x 768, bf16), 512 tokens, eager then compiled; MAE-LM
# on flex_attention and on sdpa from 512 to 8,192 tokens; a profile of MAE-LM's and BERT's steps; the same comparisons
# at 1,024 tokens; the other GPU tests. Then one summary of every table, with each step's seconds.
#
# Compiled rows compile block by block (bench/run.py --compile regional), so that each model compiles one layer's
# forward and backward rather than twelve (compiling two whole 12-layer models, forward and backward, took over 100 s
# on an H200), and only the comparisons with a target (issue 44's) are compiled; the others, ModernBERT's included,
# are timed eager. Inductor's caches (FX graphs, autograd graphs) are on and shared by every step of the call.
# `bench/run.py ... --compile whole` times Trainer's whole-model compilation, in a call of its own.
#
#   bash bench/gpu.sh             # on the GPU machine, from the repository root ($OUT/summary.md, $OUT/steps.log)
#   bash bench/gpu.sh --dry-run   # anywhere: checks that the package and the benches import, prints the plan and rows
#
# The GPU image's transformers (5.17) and huggingface-hub (1.33) are older than this package needs, and it lacks
# `datasets`: carry them as wheels in .whl/ (ignored by git; see the device notes), fetched once on a machine with pip.
# The list is what transformers 5.24, huggingface-hub 2.4 and datasets 5.2 require beyond the image (or newer than
# it has), at the versions this package was tested with; 23 MiB in all, of the 64 MiB a call carries:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#       transformers==5.24.0 huggingface_hub==2.4.0 httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 \
#       hf-xet==1.8.0 click==8.5.1 tokenizers==0.23.3 regex==2026.11.19 datasets==5.2.0 dill==0.4.1 \
#       multiprocess==0.70.19
# This script installs whatever .whl/ holds before it starts, and stops with the fix if transformers is too old.
set -uo pipefail
cd "$(dirname "$0")/.."

dry_run=false
[[ "${1:-}" == "--dry-run" ]] && dry_run=true
python=${PYTHON:-python3}
out=${OUT:-/tmp/hf-encoders-gpu}
mkdir -p "$out"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TORCHINDUCTOR_FX_GRAPH_CACHE=1 TORCHINDUCTOR_AUTOGRAD_CACHE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/hf-encoders-inductor

base="--layers 12 --hidden 768 --dtype bfloat16 --repeats 3 --no_loss_memory"
at_512="$base --batch 32 --length 512"
at_1024="$base --batch 16 --length 1024"  # the same 16,384 tokens a step
flex_tests="-m gpu tests/test_gpu.py -k 'flex or cudnn'"
# name | time limit (s) | command (run by bash -c: quotes hold)
plan=(
    "flex_attention against the dense eager bias (GPU tests)|50|$python -m pytest -q $flex_tests"
    "seq 512, eager|45|$python bench/run.py $at_512"
    "seq 512, compiled|115|$python bench/run.py $at_512 --compile regional --targets_only"
    "MAE-LM on flex_attention and sdpa, 512 to 8,192 tokens|50|$python bench/long_context.py --layers 12 --hidden 768 --tokens 16384 --dtype bfloat16 --repeats 2 --only 'BertForMaskedLM,MAE-LM,MAE-LM flex_attention'"
    "profile of MAE-LM's and BERT's steps, seq 512|25|$python bench/profile_step.py --layers 12 --hidden 768 --batch 32 --length 512 --dtype bfloat16"
    "seq 1,024, eager|30|$python bench/run.py $at_1024"
    "seq 1,024, compiled|100|$python bench/run.py $at_1024 --compile regional --targets_only"
    "the other GPU tests|40|$python -m pytest -q -m gpu tests/test_gpu.py -k 'not (flex or cudnn)'"
)

if ! $dry_run && compgen -G ".whl/*.whl" >/dev/null; then
    $python -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi

# The versions the package needs, and the imports of the package and of the benches.
$python - <<'EOF' || exit 1
import sys

import torch, transformers
from packaging.version import Version

if Version(transformers.__version__) < Version("5.23"):
    raise SystemExit(f"transformers {transformers.__version__} is too old: carry transformers>=5.23 in .whl/")
import hf_encoders  # noqa: F401

sys.path.insert(0, "bench")
import long_context, profile_step, run  # noqa: F401
device = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
print(f"torch {torch.__version__}, transformers {transformers.__version__}, {device}", flush=True)
EOF

if $dry_run; then  # the plan, with the rows each bench would time on a GPU, in one interpreter
    $python - "$out" "${plan[@]}" <<'EOF' || exit 1
import shlex, sys

sys.path.insert(0, "bench")
import long_context, run

out, *plan = sys.argv[1:]
benches = {"bench/run.py": run, "bench/long_context.py": long_context}
print(f"plan (logs under {out}; under 8 minutes):")
for step in plan:
    name, limit, command = step.split("|")
    print(f"  {name} (at most {limit} s): {command}", flush=True)
    words = shlex.split(command)
    for index, word in enumerate(words):
        if word in benches:
            benches[word].main([*words[index + 1 :], "--device", "cuda", "--list"])
EOF
    exit 0
fi

# Step logs outside $OUT, joined into one file at the end: a device call brings back at most 8 files.
logs=$(mktemp -d)
log_of() { echo "$logs/${1//[^a-zA-Z0-9]/_}.log"; }
status=0
for step in "${plan[@]}"; do
    IFS="|" read -r name limit command <<<"$step"
    echo "== $name" | tee "$(log_of "$name")"
    started=$SECONDS
    timeout "$limit" bash -c "$command" 2>&1 | tee -a "$(log_of "$name")" | grep -E "^(\||[0-9]+ (passed|failed)|FAILED)"
    code=${PIPESTATUS[0]}
    echo "   ($name: $((SECONDS - started)) s of ${limit})" | tee -a "$(log_of "$name")"
    if [[ $code -ne 0 ]]; then
        echo "   ($name ended with status $code, 124 for its time limit; see steps.log)"
        status=1
    fi
done

echo
echo "== summary"
for step in "${plan[@]}"; do
    IFS="|" read -r name limit command <<<"$step"
    echo "### $name"
    grep -E "^[0-9]+ layers|^\||[0-9]+ (passed|failed|skipped)|^   \(" "$(log_of "$name")"
    echo
done | tee "$out/summary.md"
for step in "${plan[@]}"; do
    IFS="|" read -r name limit command <<<"$step"
    cat "$(log_of "$name")"
done >"$out/steps.log"
exit $status

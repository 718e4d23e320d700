#!/usr/bin/env bash
# What a lent GPU should measure, in one call of under 8 minutes (a session's device time is 15, and a machine takes
# about a minute to start): the GPU-marked tests, bench/run.py at base size (12 x 768, batch 32 x 512, bf16, sdpa) and
# the length-scaling bench at 65,536 tokens a step, each under its own time limit, then one summary of every table.
# Compiled and flex_attention rows are the base command with --compile / --attn_implementation flex_attention: a
# call of their own (compiling 12 layers, forward and backward, took over 100 s for two models on an H200).
#
#   bash bench/gpu.sh             # on the GPU machine, from the repository root (logs and summary under $OUT)
#   bash bench/gpu.sh --dry-run   # anywhere: checks that the package and the benches import, prints the plan
#
# The GPU image's transformers (5.17) and huggingface-hub (1.33) are older than this package needs, and it lacks
# `datasets`: carry them as wheels in .whl/ (ignored by git; see the device notes), fetched once on a machine with pip
# (the versions this package was tested with):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux2014_x86_64 -d .whl transformers==5.24.0 huggingface_hub==2.4.0 httpx2==2.16.2 \
#       tokenizers==0.23.3 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 \
#       httpcore2==2.16.2 truststore==0.10.5 hf-xet==1.8.0 click==8.5.1 regex==2026.11.19
# This script installs whatever .whl/ holds before it starts, and stops with the fix if transformers is too old.
set -uo pipefail
cd "$(dirname "$0")/.."

dry_run=false
[[ "${1:-}" == "--dry-run" ]] && dry_run=true
python=${PYTHON:-python3}
out=${OUT:-/tmp/hf-encoders-gpu}
mkdir -p "$out"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

base="--layers 12 --hidden 768 --batch 32 --length 512 --dtype bfloat16 --repeats 5"
# name | time limit (s) | command
plan=(
    "gpu tests|100|$python -m pytest -q -m gpu tests/test_gpu.py"
    "base, sdpa|180|$python bench/run.py $base"
    "length scaling|140|$python bench/long_context.py --layers 12 --hidden 768 --tokens 65536 --dtype bfloat16 --repeats 2"
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
import long_context, run  # noqa: F401
device = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
print(f"torch {torch.__version__}, transformers {transformers.__version__}, {device}", flush=True)
EOF

if $dry_run; then
    echo "plan (logs under $out; under 8 minutes):"
    for step in "${plan[@]}"; do
        IFS="|" read -r name limit command <<<"$step"
        echo "  $name (at most ${limit} s): $command"
    done
    exit 0
fi

log_of() { echo "$out/${1//[^a-z0-9]/_}.log"; }
status=0
for step in "${plan[@]}"; do
    IFS="|" read -r name limit command <<<"$step"
    echo "== $name" | tee "$(log_of "$name")"
    timeout "$limit" $command 2>&1 | tee -a "$(log_of "$name")" | grep -E "^(\||[0-9]+ (passed|failed)|FAILED)"
    code=${PIPESTATUS[0]}
    if [[ $code -ne 0 ]]; then
        echo "   ($name ended with status $code, 124 for its time limit; see $(log_of "$name"))"
        status=1
    fi
done

echo
echo "== summary"
for step in "${plan[@]}"; do
    IFS="|" read -r name limit command <<<"$step"
    echo "### $name"
    grep -E "^[0-9]+ layers|^\||[0-9]+ (passed|failed|skipped)" "$(log_of "$name")"
    echo
done | tee "$out/summary.md"
exit $status

#!/usr/bin/env bash
# The experiments at GPU scale in one device call of under 8 minutes (experiments/gpu.py holds the plan and its
# sizing): parts i (M from scratch in MAE-LM's layout) and ii (U at 15% and 40%) by default; part iii (B1 and B2 at
# equal budget over three pre-training seeds) is a call of its own (`--only iii`).
#
#   python -m experiments.gpu prepare       # here, once: corpus, tokenizer and task folders into experiments/runs/gpu
#   bash experiments/gpu.sh --dry-run       # anywhere: the plan, every command's options checked, the carried size
#   bash experiments/gpu.sh [--only i,ii]   # on the GPU machine, from the repository root; results under $OUT
#
# The device call: command `bash experiments/gpu.sh`, carry ["experiments/runs/gpu", ".whl"], timeout_s 540. The GPU
# image's transformers and huggingface-hub are older than this package needs and it lacks `datasets`: carry the wheels
# bench/gpu.sh's header lists in .whl/, with sentence-transformers (ir tasks) and seqeval (tc), fetched once here:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux2014_x86_64 -d .whl transformers==5.24.0 huggingface_hub==2.4.0 httpx2==2.16.2 \
#       tokenizers==0.23.3 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 httpcore2==2.16.2 truststore==0.10.5 \
#       hf-xet==1.8.0 click==8.5.1 regex==2026.11.19 sentence-transformers==6.2.0
#   python3 -m pip wheel --no-deps -w .whl seqeval==1.2.2     # seqeval publishes no wheel: built here, pure Python
# This script installs whatever .whl/ holds before it starts, and stops within seconds, saying what to carry, if a
# module the experiments import is missing.
set -uo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
out=${OUT:-/tmp/hf-encoders-experiments}
command=run
arguments=()
for argument in "$@"; do
    if [[ "$argument" == "--dry-run" ]]; then command=plan; else arguments+=("$argument"); fi
done
mkdir -p "$out"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if [[ "$command" == run ]] && compgen -G ".whl/*.whl" >/dev/null; then
    $python -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi

# What the experiments import, and (on the device) the versions the package needs.
DRY_RUN=$([[ "$command" == plan ]] && echo 1 || echo 0) $python - <<'PY' || exit 1
import importlib.util
import os

missing = [
    name
    for name in ("torch", "transformers", "datasets", "accelerate", "torchdata", "scipy", "sklearn", "seqeval",
                 "sentence_transformers", "matplotlib", "psutil", "filelock")
    if importlib.util.find_spec(name) is None
]
if missing:
    raise SystemExit(f"missing {', '.join(missing)}: carry their wheels in .whl/ (experiments/gpu.sh's header)")
if os.environ["DRY_RUN"] == "1":
    raise SystemExit(0)
import torch, transformers
from packaging.version import Version

if Version(transformers.__version__) < Version("5.23"):
    raise SystemExit(f"transformers {transformers.__version__} is too old: carry transformers>=5.23 in .whl/")
import experiments.gpu  # noqa: F401

device = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
print(f"torch {torch.__version__}, transformers {transformers.__version__}, {device}", flush=True)
PY

$python -m experiments.gpu "$command" --out "$out" "${arguments[@]}"

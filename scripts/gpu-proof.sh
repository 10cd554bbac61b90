#!/usr/bin/env bash
# The CUDA paths of builder on one lent GPU machine (no network, no Docker), in one call
# of the device tool: the preflight probe's CUDA path (device checks, matmul, NCCL in a
# world of one with its all-reduce), DeepSpeed's ops built by builder's own image step
# for the GPU's architecture and loaded without JIT (each load timed), and the CUDA
# fingerprint. Figures in OUT/gpu-proof.json (default $OUT, else build/gpu-proof).
#
#   scripts/gpu-proof.sh --prepare        # here, once: what the ops build installs,
#                                         # into build/gpu-proof-vendor (carry it)
#   scripts/gpu-proof.sh [OUT] [OPTION..] # there (scripts/gpu_proof.py --help)
#
# Within 8 minutes on an H100 (the ops compile for one architecture).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
if [ "${1:-}" = --prepare ]; then
    exec "$python" "$root/scripts/gpu_proof.py" --out "$root/build/gpu-proof" --prepare
fi
out=${OUT:-$root/build/gpu-proof}
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    out=$1
    shift
fi
exec "$python" "$root/scripts/gpu_proof.py" --out "$out" "$@"

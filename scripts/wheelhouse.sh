#!/usr/bin/env bash
# Put the CPU build of torch in a wheelhouse folder for the integration tests:
#   scripts/wheelhouse.sh [DIR]   (default ~/.cache/builder-tests/wheels)
# First from local find-links only (--no-index: our machines keep the wheel on disk and
# PIP_FIND_LINKS points at it), else through the indexes this machine's pip is set up
# with (pip config, PIP_INDEX_URL, PIP_EXTRA_INDEX_URL: e.g. PyTorch's CPU index). It asks
# for the +cpu build by its exact version, which only a CPU index or wheel provides, so
# the multi-GB CUDA build from PyPI can never be taken instead.
set -euo pipefail

TORCH=${BUILDER_TEST_TORCH:-2.13.0}
DIR=${1:-${BUILDER_TEST_WHEELHOUSE:-$HOME/.cache/builder-tests/wheels}}
PYTHON=${PYTHON:-python3}
mkdir -p "$DIR"

have() { compgen -G "$DIR/torch-${TORCH}+cpu-*.whl" >/dev/null; }

if ! have; then
    "$PYTHON" -m pip download --quiet --no-deps --no-index -d "$DIR" "torch==${TORCH}" 2>/dev/null || true
fi
if ! have; then
    "$PYTHON" -m pip download --quiet --no-deps -d "$DIR" "torch==${TORCH}+cpu" || true
fi
if ! have; then
    echo "wheelhouse: no CPU torch ${TORCH} wheel could be had for $DIR: put" \
        "torch-${TORCH}+cpu-*.whl there, or give pip PyTorch's CPU index" \
        "(PIP_EXTRA_INDEX_URL or pip config)" >&2
    exit 1
fi
echo "wheelhouse: $(ls "$DIR"/torch-"${TORCH}"+cpu-*.whl)"

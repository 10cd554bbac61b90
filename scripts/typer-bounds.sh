#!/usr/bin/env bash
# The CLI under the oldest and the newest typer that pyproject.toml allows:
#   scripts/typer-bounds.sh            (both bounds)
#   scripts/typer-bounds.sh 0.28.0     (any versions, e.g. the newest on Python 3.10)
# For each, a venv of its own (kept under $TYPER_BOUNDS_DIR, default /tmp/builder-typer-
# bounds, and reused while its typer and dependencies stay the same), with builder
# installed --no-deps and builder's other dependencies from this machine's pip set-up (pip
# config, PIP_INDEX_URL, PIP_FIND_LINKS); then the CLI's unit tests, `builder --help` and
# `builder render --preset cuda-deepspeed`. Exit status: non-zero when any bound fails.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
WORK=${TYPER_BOUNDS_DIR:-${TMPDIR:-/tmp}/builder-typer-bounds}
TESTS=(tests/unit/test_cli.py tests/unit/test_cli_errors.py tests/unit/test_json_envelope.py tests/unit/test_docs_hooks.py)
cd "$ROOT"

# typer's requirement, and builder's other dependencies, as pyproject.toml states them
read_project() {
    "$PYTHON" - "$1" <<'EOF'
import re, sys, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
deps = [d.split(";")[0].replace(" ", "") for d in deps]
typer = [d for d in deps if re.match(r"typer\b", d)]
print("\n".join(typer if sys.argv[1] == "typer" else [d for d in deps if d not in typer]))
EOF
}
TYPER=$(read_project typer)
mapfile -t OTHERS < <(read_project others)
LOW=$(sed -n 's/.*>=\([0-9.]*\).*/\1/p' <<<"$TYPER")
[ -n "$LOW" ] || { echo "typer-bounds: no lower bound in '$TYPER'" >&2; exit 2; }

# the requirements to test: typer==LOW, and the newest TYPER admits (pip picks it)
if [ $# -gt 0 ]; then
    REQUIREMENTS=("${@/#/typer==}")
else
    REQUIREMENTS=("typer==$LOW" "$TYPER")
fi

failed=()
for requirement in "${REQUIREMENTS[@]}"; do
    start=$SECONDS
    venv="$WORK/$(tr -c 'A-Za-z0-9.\n' _ <<<"$requirement")"
    stamp="$requirement ${OTHERS[*]} pytest $("$PYTHON" -V)"
    if [ ! -x "$venv/bin/builder" ] || [ "$(cat "$venv/stamp" 2>/dev/null)" != "$stamp" ]; then
        rm -rf "$venv"
        "$PYTHON" -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check "$requirement" \
            "${OTHERS[@]}" pytest
        "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -e "$ROOT"
        echo "$stamp" >"$venv/stamp"
    fi
    version=$("$venv/bin/python" -c 'import typer; print(typer.__version__)')
    echo "== $requirement: typer $version ($(($SECONDS - start)) s to set up)"
    ok=1
    # the SARIF test runs the linters, an extra this venv does not install
    "$venv/bin/python" -m pytest -q -p no:cacheprovider "${TESTS[@]}" -k "not sarif" || ok=0
    "$venv/bin/builder" --help >/dev/null || ok=0
    "$venv/bin/builder" render --preset cuda-deepspeed | grep -q '^FROM ' || ok=0
    if [ "$ok" = 1 ]; then
        echo "== typer $version: passed ($(($SECONDS - start)) s)"
    else
        echo "== typer $version: FAILED" >&2
        failed+=("$version")
    fi
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "typer-bounds: failed under typer ${failed[*]}" >&2
    exit 1
fi

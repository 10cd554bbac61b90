"""The prebuild's process: `python -m tests.integration.prebuild FOLDER REFERENCE...`
builds the suite's shared images (tests/integration/images.py) and the multi-architecture
stack (tests/integration/multiarch.py) in that order, leaving REFERENCE.done or .failed
in FOLDER as each build ends (``images.Prebuild`` reads them)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from builder.engine import connect
from tests.conftest import run_script
from tests.integration.images import (
    BASE_IMAGE,
    MULTI_IMAGE,
    WHEELHOUSE,
    build_shared,
    marker_of,
    suite_inputs,
)
from tests.integration.multiarch import prepare_and_build

if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    folder, *references = argv
    engine = connect()
    for script, args in (("base-image.sh", [BASE_IMAGE]), ("wheelhouse.sh", [str(WHEELHOUSE)])):
        problem = run_script(script, *args)
        if problem is not None:
            print(f"scripts/{script} failed: {problem}")
            return 1
    inputs = suite_inputs()
    failed = 0
    for reference in references:
        marker = Path(folder) / marker_of(reference)
        started = time.monotonic()
        marker.with_suffix(".building").touch()  # what a waiting test says it waits on
        try:
            if reference == MULTI_IMAGE:
                prepare_and_build(engine)
            else:
                build_shared(reference, inputs, engine)
        except Exception as exc:
            print(f"{reference}: failed after {time.monotonic() - started:.0f} s: {exc}")
            marker.with_suffix(".failed").touch()
            failed += 1
        else:
            print(f"{reference}: built in {time.monotonic() - started:.0f} s", flush=True)
            marker.with_suffix(".done").touch()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

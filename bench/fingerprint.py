"""Time to fingerprint a running container and an image.

Starts one container of the image (its default command, sshd for builder's
images), then times, side by side in one run: the library call
(``of_container``: docker exec of the collector), the command a user types
(`builder fingerprint --container NAME`, interpreter start included), and an
image's fingerprint (a throwaway container). Target: about a second for a
running container.

    .venv/bin/python bench/fingerprint.py [--image REF] [--runs N]

Exit status: 0 when the figures were measured; 1 when the image is missing
or a fingerprint fails.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from _support import BenchError, add_built_image_options, built_image, run_main

if TYPE_CHECKING:
    from collections.abc import Callable

BUILDER = Path(sys.executable).with_name("builder")


def timed(action: Callable[[], object], runs: int) -> float:
    walls = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


def measure(args: argparse.Namespace, _scratch: Path) -> None:
    from builder.engine import connect
    from builder.fingerprint.sources import of_container, of_image

    engine = connect()
    name = f"bench-fingerprint-{uuid.uuid4().hex[:8]}"
    engine.start(built_image(engine, args.image), name=name)
    try:
        time.sleep(1)
        digest = of_container(engine, name).digest
        library = timed(lambda: of_container(engine, name), args.runs)
        argv = [str(BUILDER), "fingerprint", "--container", name]

        def command() -> None:
            if subprocess.run(argv, capture_output=True, check=False).returncode != 0:
                raise BenchError(f"{' '.join(argv)} failed")

        cli = timed(command, args.runs)
        image = timed(lambda: of_image(engine, args.image), args.runs)
    finally:
        engine.remove_container(name)
    print(f"fingerprint {digest} of {args.image}: median of {args.runs} runs\n")
    print("| what | time |")
    print("|---|---|")
    print(f"| running container, library (docker exec) | {library:.2f} s |")
    print(f"| running container, `builder fingerprint --container` | {cli:.2f} s |")
    print(f"| image (throwaway container) | {image:.2f} s |")
    verdict = "OK" if cli <= 1.5 else "MISSED"
    print(
        f"\ncontainer fingerprint from the command line: {cli:.2f} s (target about 1 s): {verdict}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_built_image_options(parser, runs=10)
    return run_main(parser, measure, argv, scratch_prefix="bench-fingerprint-")


if __name__ == "__main__":
    sys.exit(main())

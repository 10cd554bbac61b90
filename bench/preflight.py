"""Wall time of `builder preflight --rehearse --quick`, start to torn down.

Each run is the command a user types, `builder preflight --preset cpu-deepspeed
--image IMAGE --rehearse --quick --json`, timed from start to exit: interpreter
start, the rehearsal's containers up, the ssh mesh, the probe through DeepSpeed
on 2 nodes x 2 ranks (devices, matmul, memory copy, all-reduce sweep, links,
fingerprints) and teardown. Its JSON gives the phases and the probe's figures.
The image must already be built (the integration tests build
builder-test/cpu-deepspeed:it), else pass --image.

Target on our 2-core machines: under 30 s (median of 3).

    .venv/bin/python bench/preflight.py [--image REF] [--runs N]

Exit status: 0 when the figures were measured (a missed target is a figure);
1 when preflight could not run or the image is missing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _support import BenchError, add_built_image_options, built_image, run_main

TARGET = 30.0
BUILDER = Path(sys.executable).with_name("builder")
PASSED, FOUND = 0, 15
"""preflight's exit codes with figures: passed, or named a problem (still measured)."""


def preflight(image: str) -> tuple[float, dict[str, object]]:
    argv = [str(BUILDER), "preflight", "--preset", "cpu-deepspeed", "--image", image]
    argv += ["--rehearse", "--quick", "--json"]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (PASSED, FOUND):
        raise BenchError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout)["result"]


def measure(args: argparse.Namespace, _scratch: Path) -> None:
    from builder.engine import connect

    built_image(connect(), args.image)
    print("warm-up: one run for the engine's and the page cache", file=sys.stderr)
    preflight(args.image)
    runs = [preflight(args.image) for _ in range(args.runs)]
    walls = [wall for wall, _ in runs]
    wall = statistics.median(walls)
    _, data = min(runs, key=lambda run: abs(run[0] - wall))
    phases = data["phases"]
    assert isinstance(phases, dict)
    print(f"builder preflight --rehearse --quick --image {args.image}: 2 nodes x 2 ranks")
    print(f"runs: {', '.join(f'{w:.1f} s' for w in walls)}; median {wall:.1f} s")
    print("phases of the median run: " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()))
    nodes = data["nodes"]
    assert isinstance(nodes, list)
    for row in nodes:
        print(
            f"  {row['node']}: matmul {row['tflops']:.3g} TFLOP/s, memory copy "
            f"{row['memory_gbps']:.3g} GB/s, link out {row['out_gbps']:.3g} GB/s"
        )
    verdict = "OK" if wall < TARGET else "MISSED"
    print(f"\npreflight --quick, 2 nodes: {wall:.1f} s (target < {TARGET:.0f} s): {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_built_image_options(parser, runs=3)
    return run_main(parser, measure, argv, scratch_prefix="bench-preflight-")


if __name__ == "__main__":
    sys.exit(main())

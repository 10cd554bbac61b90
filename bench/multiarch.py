"""Build times of one stack for linux/amd64 and, under qemu, linux/arm64, side by side.

The stack is the suite's multi-architecture cpu-deepspeed (tests/integration/
multiarch.py): the cpu-deepspeed preset on a torch base per architecture (this
machine's CPU torch wheel on amd64, PyPI's CPU aarch64 torch on arm64; no PyTorch
index is reachable here), DeepSpeed's ops left out, `image.platforms: [linux/amd64,
linux/arm64]`. Three figures per architecture, each the wall time of builder's own
build of that architecture (`build_image` with its platform, as `builder build` runs
it for each):

1. cold: the torch base and the stack, every step run (``nocache``);
2. cached base: the stack alone, every step run, its base in the engine;
3. no-op: both architectures again through `build_platforms`, nothing changed.

The ratio arm64/amd64 of each is the price of emulation on this machine. Target: the
no-op rebuild of both architectures under 5 s. Needs scripts/emulation.sh and the two
Debian bases (scripts/base-image.sh, BUILDER_BASE_ARCH=arm64 for the second), which the
integration tests make.

    .venv/bin/python bench/multiarch.py [--skip-cold]

Exit status: 0 when the figures were measured (a missed target is a figure); 1 when a
build fails or a base is missing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from _support import BenchError, run_main

# the suite's stack and its torch bases: one definition for the tests and this figure
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from builder.architectures import AMD64, ARM64
from builder.engine import connect
from builder.engine.build import build_image
from builder.resolved import resolve
from tests.integration import multiarch

if TYPE_CHECKING:
    from builder.architectures import Architecture
    from builder.engine import Engine

NOOP_TARGET = 5.0


def stack_seconds(engine: Engine, architecture: Architecture, *, nocache: bool) -> float:
    started = time.monotonic()
    build_image(
        resolve(multiarch.multi_stack(), multiarch.multi_inputs()),
        reference=f"bench/multi:{architecture.engine}",
        nocache=nocache,
        engine=engine,
        architecture=architecture,
        progress=multiarch._progress(),
    )
    return time.monotonic() - started


def measure(args: argparse.Namespace, scratch: Path) -> dict[str, object]:
    del scratch
    engine = connect()
    for base in multiarch.BASES.values():
        if not engine.exists(base):
            raise BenchError(f"base {base} is missing: run the integration tests or scripts/")
    wheels = {AMD64: multiarch.amd64_torch_wheel(), ARM64: multiarch.arm64_torch_wheel()}
    figures: dict[str, dict[str, float]] = {}
    for architecture, wheel in wheels.items():
        if wheel is None:
            raise BenchError(f"no CPU torch wheel for {architecture.machine}")
        row = figures.setdefault(architecture.platform, {})
        if not args.skip_cold:
            started = time.monotonic()
            multiarch.build_torch_base(engine, architecture, wheel, nocache=True)
            torch_base = time.monotonic() - started
            row["cold"] = torch_base + stack_seconds(engine, architecture, nocache=True)
        else:
            multiarch.build_torch_base(engine, architecture, wheel)
        row["cached base"] = stack_seconds(engine, architecture, nocache=True)
    started = time.monotonic()
    multiarch.build_multi(engine)
    noop = time.monotonic() - started
    print(f"{'figure':<12} {'amd64':>9} {'arm64 (qemu)':>13} {'ratio':>7}")
    for name in ("cold", "cached base"):
        amd, arm = figures[AMD64.platform].get(name), figures[ARM64.platform].get(name)
        if amd is not None and arm is not None:
            print(f"{name:<12} {amd:>8.1f}s {arm:>12.1f}s {arm / amd:>6.1f}x")
    said = "met" if noop < NOOP_TARGET else "MISSED"
    print(
        f"no-op rebuild of both architectures: {noop:.1f} s (target < {NOOP_TARGET:.0f} s: {said})"
    )
    for architecture in (AMD64, ARM64):
        engine.remove_image(f"bench/multi:{architecture.engine}", force=False, prune=False)
    return {"figures": figures, "noop_seconds": noop}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--skip-cold", action="store_true", help="leave out the cold builds (minutes)"
    )
    return run_main(parser, measure, argv, scratch_prefix="bench-multiarch-")


if __name__ == "__main__":
    sys.exit(main())

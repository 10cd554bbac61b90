"""A usable DeepSpeedCPUAdam in a fresh container: compiled just in time against prebuilt.

Two images of the cpu-deepspeed preset are built in this run from the same base,
CA bundle and torch wheel (the engine's cache shares every layer but DeepSpeed's):
- prebuilt: the preset as it is (image.deepspeed_ops defaults to cpu_adam and
  deepspeed_shm_comm, compiled by the build);
- jit: the same spec with ``deepspeed_ops: []``, as images were before, so each
  container compiles cpu_adam on first use.

The figure is the time from a container's creation to the end of one DeepSpeedCPUAdam step
in a fresh container (the container's start, Python, torch and DeepSpeed's imports,
the op's load or compile, one step), the median of --runs, measured side by side
(jit, prebuilt, jit, ...). The target: prebuilt at least 20 times faster. Also
shown: the images' sizes, and what the prebuilt ops add.

    .venv/bin/python bench/op_load.py [--runs N] [--keep]

Exit status: 0 when the figures were measured (a missed target is a figure); 1
when a build or a run fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from typing import TYPE_CHECKING

from _support import (
    PRESET,
    BenchError,
    add_input_options,
    build_inputs,
    connect,
    progress,
    remove_created,
    run_main,
)

from builder.resolved import resolve

if TYPE_CHECKING:
    from pathlib import Path

    from builder.engine import Engine
    from builder.engine.build import BuildResult

TARGET = 20.0
STEP = (
    "import sys, time, torch; "
    "from deepspeed.accelerator import get_accelerator; "
    "from deepspeed.ops.adam import DeepSpeedCPUAdam; "
    "t = time.perf_counter(); get_accelerator().create_op_builder('CPUAdamBuilder').load(); "
    "load = time.perf_counter() - t; "
    "p = torch.nn.Parameter(torch.ones(1024)); p.grad = torch.ones(1024); "
    "DeepSpeedCPUAdam([p], lr=0.1).step(); "
    "how = 'prebuilt' if 'deepspeed.ops.adam.cpu_adam_op' in sys.modules else 'compiled'; "
    "print(how, load)"
)


def one_step(engine: Engine, image: str) -> tuple[float, float, str]:
    """Seconds from a fresh container's start to a DeepSpeedCPUAdam step done, seconds of
    the op's load (or compile) alone, and how DeepSpeed got the op (a failed step is a
    BuildError, with its output)."""
    start = time.perf_counter()
    output = engine.run(image, ["-c", STEP], entrypoint=["/opt/venv/bin/python"])
    seconds = time.perf_counter() - start
    how, load = output.strip().splitlines()[-1].split()
    return seconds, float(load), how


def measure(args: argparse.Namespace, scratch: Path) -> None:
    from builder.engine.build import build_image
    from builder.spec.loader import load_preset

    engine = connect(args.base_image)
    inputs = build_inputs(args, scratch)
    prebuilt_stack = load_preset(PRESET)
    image = dataclasses.replace(prebuilt_stack.spec.image, deepspeed_ops=())
    jit_stack = dataclasses.replace(
        prebuilt_stack, spec=dataclasses.replace(prebuilt_stack.spec, image=image)
    )
    builds: list[BuildResult] = []
    try:
        for stack, tag in ((prebuilt_stack, "prebuilt"), (jit_stack, "jit")):
            print(f"building {PRESET} ({tag})", file=sys.stderr)
            builds.append(
                build_image(
                    resolve(stack, inputs),
                    engine=engine,
                    reference=f"bench/op-load:{tag}",
                    progress=progress(),
                )
            )
        prebuilt, jit = (build.reference for build in builds)
        times: dict[str, list[float]] = {jit: [], prebuilt: []}
        loads: dict[str, list[float]] = {jit: [], prebuilt: []}
        for run in range(args.runs):
            for reference, expected in ((jit, "compiled"), (prebuilt, "prebuilt")):
                seconds, load, how = one_step(engine, reference)
                if how != expected:
                    raise BenchError(f"{reference}: DeepSpeed's op was {how}, not {expected}")
                times[reference].append(seconds)
                loads[reference].append(load)
                print(f"run {run + 1}: {reference} {seconds:.2f} s ({how})", file=sys.stderr)
        sizes = {ref: engine.image(ref).size for ref in (jit, prebuilt)}
    finally:
        if not args.keep:
            remove_created(engine, builds)
    slow, fast = statistics.median(times[jit]), statistics.median(times[prebuilt])
    print(f"{PRESET}: a fresh container to one DeepSpeedCPUAdam step, median of {args.runs}")
    for reference in (jit, prebuilt):
        each = ", ".join(f"{s:.2f}" for s in times[reference])
        print(f"  {reference:24} {statistics.median(times[reference]):7.2f} s  ({each})")
    ratio = slow / fast
    verdict = "OK" if ratio >= TARGET else "MISSED"
    print(f"  prebuilt is {ratio:.1f}x faster (target >= {TARGET:.0f}x): {verdict}")
    print("the op's load alone (CPUAdamBuilder().load() after the imports), median:")
    for reference in (jit, prebuilt):
        print(f"  {reference:24} {statistics.median(loads[reference]):7.3f} s")
    compiled, loaded = statistics.median(loads[jit]), statistics.median(loads[prebuilt])
    print(f"  prebuilt is {compiled / loaded:.0f}x faster")
    rest = fast - statistics.median(loads[prebuilt])
    print(
        f"  the other {rest:.2f} s of a prebuilt start: the container, Python, torch and "
        "DeepSpeed's imports, and py-cpuinfo, which DeepSpeedCPUAdam's constructor runs"
    )
    added = sizes[prebuilt] - sizes[jit]
    print(
        f"image size: jit {sizes[jit] / 1e9:.3f} GB, prebuilt {sizes[prebuilt] / 1e9:.3f} GB; "
        f"the prebuilt ops add {added / 1e6:.1f} MB"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_input_options(parser, built="the images")
    parser.add_argument("--runs", type=int, default=3, help="runs per image (median shown)")
    parser.add_argument("--keep", action="store_true", help="keep the two images")
    return run_main(parser, measure, argv, scratch_prefix="bench-op-load-")


if __name__ == "__main__":
    sys.exit(main())

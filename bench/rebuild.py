"""Rebuild times of a cpu-deepspeed stack: cold, no-op, and after a requirements change.

A stack file is made from the cpu-deepspeed preset (what `builder init
--preset cpu-deepspeed` writes) with ``image.name: bench/rebuild`` and
``image.requirements: requirements.txt`` (a small pure-Python pin). It is
then built three times, as `builder build stack.yaml` would, with the same
base image, CA bundle and torch wheel:

1. cold: no cache at all (``nocache=True``);
2. no-op: nothing changed, so every step should come from the cache;
3. requirements change: the pin moves to the next release, so only the
   requirements step and what follows it should run again.

Each figure is the wall time of ``load_spec`` + ``build_image`` (rendering,
the build context upload and the build; not the interpreter start). Targets:
the no-op rebuild under 5 s, the requirements change under 15% of cold. The
script checks that each build installed the pin it was given.

    .venv/bin/python bench/rebuild.py [--keep]

The image is tagged bench/rebuild:latest and removed at the end, with
every image the builds created (stages, the image the change replaced),
unless --keep. Exit status: 0 when the figures were measured (a missed
target is a figure); 1 when a build or a check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import dataclass
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
    from builder.image.inputs import BuildInputs

NAME = "bench/rebuild"
PRESET_NAME_LINE = "  name: builder/cpu-deepspeed\n"
PACKAGE, BEFORE, AFTER = "six", "1.16.0", "1.17.0"
NOOP_TARGET_SECONDS = 5.0
CHANGE_TARGET_RATIO = 0.15


@dataclass(frozen=True)
class Timed:
    """One build of the series and its wall time."""

    label: str
    result: BuildResult
    seconds: float

    @property
    def cached(self) -> str:
        return f"{self.result.cached_steps}/{len(self.result.cacheable_steps)}"


def stack_text() -> str:
    """The preset's YAML as `builder init` writes it, renamed, with a requirements file."""
    from builder.spec.presets import preset_text

    text = preset_text(PRESET)
    if text.count(PRESET_NAME_LINE) != 1:
        raise BenchError(f"the {PRESET} preset has no line {PRESET_NAME_LINE!r} to rename")
    return text.replace(PRESET_NAME_LINE, f"  name: {NAME}\n  requirements: requirements.txt\n")


def timed_build(
    label: str,
    spec: Path,
    inputs: BuildInputs,
    engine: Engine,
    built: list[BuildResult],
    *,
    wanted: str,
    nocache: bool = False,
) -> Timed:
    """Load the spec and build it, as `builder build` does; check the pin it installed.

    The result goes into built before the check, so that a failed check
    still removes what the build created.
    """
    from builder.engine.build import build_image
    from builder.spec.loader import load_spec

    print(f"== {label}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    result = build_image(
        resolve(load_spec(spec), inputs), nocache=nocache, progress=progress(), engine=engine
    )
    seconds = time.perf_counter() - started
    built.append(result)
    code = f"import {PACKAGE}; print({PACKAGE}.__version__)"
    found = engine.run(result.reference, ["-c", code], entrypoint=["/opt/venv/bin/python"])
    if found.strip() != wanted:
        raise BenchError(f"{label}: the image has {PACKAGE} {found.strip()}, not {wanted}")
    return Timed(label, result, seconds)


def report(cold: Timed, noop: Timed, change: Timed) -> None:
    print(f"{PRESET} stack with requirements.txt ({PACKAGE}=={BEFORE} -> {AFTER}), as {NAME}")
    print(f"{'build':<22} {'seconds':>8} {'cached steps':>13} {'/ cold':>7}")
    for timed in (cold, noop, change):
        ratio = "" if timed is cold else f"{timed.seconds / cold.seconds:7.3f}"
        print(f"{timed.label:<22} {timed.seconds:8.1f} {timed.cached:>13} {ratio}")
    froms = len(cold.result.steps) - len(cold.result.cacheable_steps)
    print(f"(the {froms} FROM lines are not counted: they only name an image, never cached)")
    print()
    ok = noop.seconds < NOOP_TARGET_SECONDS
    print(
        f"no-op rebuild: {noop.seconds:.1f} s (target < {NOOP_TARGET_SECONDS:.0f} s): "
        f"{'OK' if ok else 'MISSED'}"
    )
    share = change.seconds / cold.seconds
    ok = share < CHANGE_TARGET_RATIO
    print(
        f"requirements change: {share:.1%} of cold (target < {CHANGE_TARGET_RATIO:.0%}): "
        f"{'OK' if ok else 'MISSED'}"
    )
    same = noop.result.image_id == cold.result.image_id
    print(f"no-op rebuild gave the same image: {'yes' if same else 'NO (a step was not cached)'}")
    print("steps that ran again after the requirements change:")
    for step in change.result.cacheable_steps:
        if not step.cached:
            print(f"  {step.seconds:6.1f} s  {' '.join(step.instruction.split())[:90]}")


def measure(args: argparse.Namespace, scratch: Path) -> None:
    inputs = build_inputs(args, scratch / "wheels")
    spec, requirements = scratch / "stack.yaml", scratch / "requirements.txt"
    spec.write_text(stack_text(), encoding="utf-8")
    with contextlib.closing(connect(args.base_image)) as engine:
        built: list[BuildResult] = []
        try:
            requirements.write_text(f"{PACKAGE}=={BEFORE}\n", encoding="utf-8")
            cold = timed_build(
                "cold (no cache)", spec, inputs, engine, built, wanted=BEFORE, nocache=True
            )
            noop = timed_build("no-op rebuild", spec, inputs, engine, built, wanted=BEFORE)
            requirements.write_text(f"{PACKAGE}=={AFTER}\n", encoding="utf-8")
            change = timed_build("requirements change", spec, inputs, engine, built, wanted=AFTER)
            report(cold, noop, change)
        finally:
            if args.keep:
                print(f"kept: {NAME}:latest" if built else "kept: nothing was built")
            else:
                remove_created(engine, built)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--keep", action="store_true", help=f"keep the image ({NAME}:latest)")
    add_input_options(parser, built="the image")
    return run_main(parser, measure, argv, scratch_prefix="bench-rebuild-")


if __name__ == "__main__":
    sys.exit(main())

"""Size of the cpu-deepspeed image against a hand-written tutorial-style Dockerfile.

Both images are built cold (no cache) in the same run, from the same base
image, CA bundle and torch wheel: ours with ``build_image`` from the
cpu-deepspeed preset, theirs with ``run_build`` from bench/tutorial/Dockerfile,
written the way the usual multi-node DeepSpeed tutorials write it (one stage,
apt with recommends and its lists left in, pip's cache kept, the wheel
copied in and deleted in a later layer). Sizes are the engine's own
(`docker image inspect` Size). The target is ours at most 0.80 of theirs.

The floor is the sum of the parts: the base image, plus the Installed-Size
(from dpkg) of the Debian packages ours adds over the base, plus /opt/torch
(torch and its dependencies, a layer of their own that the venv sees
through a .pth) and /opt/venv in ours (`du -sxb`). It leaves out what
packages' install scripts generate (Python byte-code, the dpkg database),
so it is a lower bound no image of these packages can go under. The script
also checks that the comparison is fair: both images must hold the same
Python packages (`pip list`), and the tutorial's Debian packages must
include all of ours.

    .venv/bin/python bench/image_size.py [--keep]

Images are tagged bench/cpu-deepspeed:ours and :tutorial and removed at the
end, with every image the builds created (build stages), unless --keep. Exit
status: 0 when the figures were measured (a missed target is a figure); 1
when a build or a measurement fails.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from _support import (
    DEFAULT_BASE,
    PRESET,
    add_input_options,
    build_inputs,
    connect,
    progress,
    remove_created,
    run_main,
)

from builder.resolved import resolve

if TYPE_CHECKING:
    from builder.engine import Engine
    from builder.engine.build import BuildResult
    from builder.image.inputs import BuildInputs

BENCH = Path(__file__).resolve().parent
TUTORIAL = BENCH / "tutorial" / "Dockerfile"
OURS = "bench/cpu-deepspeed:ours"
THEIRS = "bench/cpu-deepspeed:tutorial"
TARGET_RATIO = 0.80
MB = 1e6
SHELL = ["/bin/sh", "-c"]
DPKG_SIZES = r"dpkg-query -W -f='${Package}:${Architecture} ${Installed-Size}\n'"
PIP_LIST = "/opt/venv/bin/python -m pip list --format=freeze --disable-pip-version-check"
PYTHON_TREES = ("/opt/torch", "/opt/venv")
"""What ours installs with pip: torch and its dependencies, and the venv that sees them."""
TOP_LAYERS = 5
_SHELL = re.compile(r"(?:/bin/sh|/bin/bash -o pipefail) -c (#\(nop\) )?(.*)$", re.DOTALL)


@dataclass(frozen=True)
class Contents:
    """What is installed in an image, read from inside it."""

    debs: dict[str, int]
    """Debian package (name:arch) -> Installed-Size in bytes."""
    python: frozenset[str]
    """`pip list --format=freeze` lines of /opt/venv (empty without a venv)."""


@dataclass(frozen=True)
class Floor:
    """The sum of the parts of ours, in bytes."""

    base: int
    debs: int
    deb_count: int
    trees: dict[str, int]
    """`du -sxb` of each of PYTHON_TREES in ours."""

    @property
    def total(self) -> int:
        return self.base + self.debs + sum(self.trees.values())


def build_ours(engine: Engine, inputs: BuildInputs) -> BuildResult:
    from builder.engine.build import build_image
    from builder.spec.loader import load_preset

    print("== ours (builder)", file=sys.stderr, flush=True)
    return build_image(
        resolve(load_preset(PRESET), inputs),
        reference=OURS,
        nocache=True,
        progress=progress(),
        engine=engine,
    )


def build_theirs(engine: Engine, inputs: BuildInputs) -> BuildResult:
    """bench/tutorial/Dockerfile with the CA bundle and only the torch wheel as its context."""
    from builder.engine.build import run_build
    from builder.image.context import DOCKERFILE
    from builder.image.steps import BUILD_TOOLS
    from builder.output import OutputFile
    from builder.spec.loader import load_preset

    image = load_preset(PRESET).spec.image
    assert image.torch is not None
    assert image.deepspeed is not None
    wheel = inputs.wheel_for("torch", image.torch)
    assert wheel is not None
    assert inputs.ca_pem is not None
    files = [
        OutputFile(DOCKERFILE, 0o644, TUTORIAL.read_text(encoding="utf-8")),
        OutputFile("ca.crt", 0o644, inputs.ca_pem),
        OutputFile(f"wheels/{wheel.filename}", 0o644, "", wheel.path),
    ]
    pins = dict(tool.split("==") for tool in BUILD_TOOLS)
    args = {
        "BASE_IMAGE": inputs.base_image or DEFAULT_BASE,
        "DEEPSPEED_VERSION": image.deepspeed,
        "SETUPTOOLS_VERSION": pins["setuptools"],
        "WHEEL_VERSION": pins["wheel"],
    }
    print("== tutorial (hand-written)", file=sys.stderr, flush=True)
    return run_build(
        files,
        THEIRS,
        log_name="bench-tutorial",
        build_args=args,
        nocache=True,
        progress=progress(),
        engine=engine,
    )


def read_contents(engine: Engine, image: str) -> Contents:
    """Debian packages with their Installed-Size, and the venv's Python packages."""
    debs = {}
    for line in engine.run(image, [DPKG_SIZES], entrypoint=SHELL).splitlines():
        name, _, kib = line.partition(" ")
        debs[name] = int(kib or 0) * 1024
    pip = engine.run(image, [f"if [ -d /opt/venv ]; then {PIP_LIST}; fi"], entrypoint=SHELL)
    return Contents(debs, frozenset(pip.split()))


def du_bytes(engine: Engine, image: str, path: str) -> int:
    """Apparent size of path in image, each hard-linked file once (`du -sxb`)."""
    return int(engine.run(image, [f"du -sxb {path}"], entrypoint=SHELL).split()[0])


def top_layers(engine: Engine, reference: str) -> list[tuple[int, str]]:
    """The largest layers of an image: (bytes, the instruction that made it)."""
    layers = []
    for created_by, size in engine.history(reference):
        # CreatedBy is "|N ARG=value ... /bin/sh -c CMD" for RUN (build args shown),
        # "/bin/sh -c #(nop) INSTRUCTION" otherwise.
        shell = _SHELL.search(created_by)
        if shell is None:
            instruction = "(imported base image)"
        else:
            instruction = shell[2] if shell[1] else f"RUN {shell[2]}"
        layers.append((size, " ".join(instruction.split())))
    return sorted(layers, key=lambda layer: -layer[0])[:TOP_LAYERS]


def mb(size: float) -> str:
    return f"{size / MB:9.1f}"


def report(
    engine: Engine,
    sizes: dict[str, int],
    floor: Floor,
    ours: Contents,
    theirs: Contents,
    built: list[BuildResult],
) -> None:
    print(f"{PRESET}: builder's image vs bench/tutorial/Dockerfile, both built cold in this run")
    print(f"{'image':<28} {'size (MB)':>9}")
    rows = [("base", sizes["base"]), ("ours (builder)", sizes["ours"])]
    rows += [("tutorial (hand-written)", sizes["tutorial"]), ("floor (sum of parts)", floor.total)]
    for label, size in rows:
        print(f"{label:<28} {mb(size)}")
    print()
    ratio = sizes["ours"] / sizes["tutorial"]
    verdict = "OK" if ratio <= TARGET_RATIO else "MISSED"
    print(f"ratio ours/tutorial: {ratio:.3f} (target <= {TARGET_RATIO:.2f}): {verdict}")
    over = sizes["ours"] - floor.total
    print(
        f"ours over the floor: {over / MB:+.1f} MB ({over / floor.total:+.1%}); "
        f"ratio ours/floor {sizes['ours'] / floor.total:.3f}"
    )
    trees = " + ".join(f"{path} {size / MB:.1f} MB" for path, size in floor.trees.items())
    print(
        f"floor = base image {floor.base / MB:.1f} MB + Installed-Size of the {floor.deb_count} "
        f"Debian packages ours adds to the base {floor.debs / MB:.1f} MB + in ours (du -sxb) "
        f"{trees}; it leaves out files that install scripts generate (byte-code, "
        "dpkg database), so no image of these packages is smaller"
    )
    print()
    if ours.python == theirs.python:
        print(f"fair: both venvs hold the same {len(ours.python)} Python packages (pip list)")
    else:
        print("WARNING: the venvs differ, so the comparison is not like for like:")
        print(f"  only ours: {sorted(ours.python - theirs.python)}")
        print(f"  only tutorial: {sorted(theirs.python - ours.python)}")
    missing = sorted(set(ours.debs) - set(theirs.debs))
    extra = set(theirs.debs) - set(ours.debs)
    if missing:
        print(f"WARNING: Debian packages of ours missing from the tutorial: {missing}")
    print(
        f"tutorial: {len(extra)} more Debian packages than ours (recommends), "
        f"{sum(theirs.debs[p] for p in extra) / MB:.1f} MB Installed-Size"
    )
    print("build times (cold): " + ", ".join(f"{b.reference} {b.seconds:.0f} s" for b in built))
    for result in built:
        print(f"largest layers of {result.reference}:")
        for size, command in top_layers(engine, result.reference):
            print(f"  {mb(size)} MB  {command[:90]}")


def measure(args: argparse.Namespace, scratch: Path) -> None:
    inputs = build_inputs(args, scratch)
    with contextlib.closing(connect(args.base_image)) as engine:
        built: list[BuildResult] = []
        try:
            built.append(build_ours(engine, inputs))
            built.append(build_theirs(engine, inputs))
            base_contents = read_contents(engine, args.base_image)
            ours, theirs = read_contents(engine, OURS), read_contents(engine, THEIRS)
            added = set(ours.debs) - set(base_contents.debs)
            floor = Floor(
                base=engine.image(args.base_image).size,
                debs=sum(ours.debs[p] for p in added),
                deb_count=len(added),
                trees={path: du_bytes(engine, OURS, path) for path in PYTHON_TREES},
            )
            sizes = {
                "base": engine.image(args.base_image).size,
                "ours": engine.image(OURS).size,
                "tutorial": engine.image(THEIRS).size,
            }
            report(engine, sizes, floor, ours, theirs, built)
        finally:
            if args.keep:
                print(f"kept: {', '.join(b.reference for b in built) or 'nothing was built'}")
            else:
                remove_created(engine, built)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--keep", action="store_true", help="keep the images (bench/ tags)")
    add_input_options(parser, built="both images")
    return run_main(parser, measure, argv, scratch_prefix="bench-wheels-")


if __name__ == "__main__":
    sys.exit(main())

"""What the image benchmarks share: their build inputs, options, engine and cleanup.

Not a benchmark itself (`make bench` runs bench/[!_]*.py). The Docker engine
is reached only through ``builder.engine.Engine``, as everywhere else.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    from builder.engine import Engine
    from builder.engine.build import BuildResult
    from builder.engine.progress import PlainProgress
    from builder.image.inputs import BuildInputs

PRESET = "cpu-deepspeed"
DEFAULT_BASE = "builder-test/bookworm:latest"
DEFAULT_CA = Path("/etc/ssl/certs/ca-certificates.crt")
DEFAULT_WHEELHOUSE = Path("/tmp/wh")
BUILT_IMAGE = "builder-test/cpu-deepspeed:it"
"""What the benchmarks of a built image use by default (the integration tests build it)."""


class BenchError(Exception):
    """A build, a check or a measurement failed: there are no figures to report."""


def add_input_options(parser: argparse.ArgumentParser, *, built: str) -> None:
    """--base-image, --ca-bundle and --wheelhouse; built names what is built ("the image")."""
    parser.add_argument(
        "--base-image", default=DEFAULT_BASE, help=f"base of {built} (default: {DEFAULT_BASE})"
    )
    parser.add_argument(
        "--ca-bundle",
        type=Path,
        default=DEFAULT_CA,
        help=f"CA bundle pip needs while building {built} (default: {DEFAULT_CA})",
    )
    parser.add_argument(
        "--wheelhouse",
        type=Path,
        default=None,
        help=f"folder with the CPU torch wheel (default: {DEFAULT_WHEELHOUSE} if it has one, "
        "else a pip download into a temporary folder)",
    )


def add_built_image_options(parser: argparse.ArgumentParser, *, runs: int) -> None:
    """--image (an image already built) and --runs, for the benchmarks that build nothing."""
    parser.add_argument("--image", default=BUILT_IMAGE, help=f"default: {BUILT_IMAGE}")
    parser.add_argument("--runs", type=int, default=runs, help="runs per figure (median shown)")


def built_image(engine: Engine, image: str) -> str:
    """image, or BenchError when the engine does not have it."""
    if not engine.exists(image):
        raise BenchError(f"image {image} is not built: build it or pass --image")
    return image


def run_main(
    parser: argparse.ArgumentParser,
    measure: Callable[[argparse.Namespace, Path], object],
    argv: list[str] | None,
    *,
    scratch_prefix: str,
) -> int:
    """Parse, measure in a scratch folder; exit status 1 with one line when it fails."""
    from builder.errors import BuilderError

    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix=scratch_prefix) as scratch:
            measure(args, Path(scratch))
    except (BenchError, BuilderError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def preset_torch() -> str:
    """The torch version the preset pins."""
    from builder.spec.loader import load_preset

    torch = load_preset(PRESET).spec.image.torch
    if torch is None:
        raise BenchError(f"the {PRESET} preset pins no torch")
    return torch


def build_inputs(args: argparse.Namespace, scratch: Path) -> BuildInputs:
    """The options' base image and CA, and a wheelhouse holding the preset's CPU torch."""
    from builder.image.inputs import load_inputs

    torch = preset_torch()
    wheelhouse = wheelhouse_with_torch(args.wheelhouse, torch, scratch)
    inputs = load_inputs(
        base_image=args.base_image, ca_bundle=args.ca_bundle, wheelhouse=wheelhouse
    )
    if inputs.wheel_for("torch", torch) is None:
        # Without it the build would fetch torch from an index this machine cannot reach.
        raise BenchError(f"--wheelhouse {wheelhouse} has no torch {torch} wheel")
    return inputs


def wheelhouse_with_torch(given: Path | None, torch: str, scratch: Path) -> Path:
    """The folder to take the torch wheel from: given, /tmp/wh, or a fresh pip download."""
    if given is not None:
        return given
    if any(DEFAULT_WHEELHOUSE.glob(f"torch-{torch}+cpu-*.whl")):
        return DEFAULT_WHEELHOUSE
    # The +cpu local version can only match a CPU wheel, never PyPI's multi-GB CUDA torch.
    print(f"downloading torch {torch} (CPU) into {scratch}", file=sys.stderr)
    argv = [sys.executable, "-m", "pip", "download", f"torch=={torch}+cpu", "--no-deps"]
    argv += ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp"]
    argv += ["--platform", "manylinux_2_28_x86_64", "-d", str(scratch)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BenchError(
            f"pip download torch=={torch}+cpu failed; give --wheelhouse DIR holding a CPU torch "
            f"{torch} cp311 wheel:\n{proc.stderr.strip()}"
        )
    return scratch


def connect(base_image: str) -> Engine:
    """The engine, which must hold the base image (the builds never pull)."""
    from builder.engine import connect

    engine = connect()
    if not engine.exists(base_image):
        engine.close()
        raise BenchError(f"the engine has no base image {base_image} (scripts/base-image.sh)")
    return engine


def progress() -> PlainProgress:
    """One line per step on stderr, so that stdout holds only the figures."""
    from builder.engine.progress import PlainProgress

    return PlainProgress(sys.stderr, logs=False)


def remove_created(engine: Engine, builds: Sequence[BuildResult]) -> None:
    """Remove the tags our builds set, then the images they created, newest first.

    Other builds may share the engine (CI jobs, developers), so nothing is
    forced or pruned: an image that another build has since used as its
    cache (it has children) stays, as does every image we did not create
    (cache hits, FROM images).
    """
    tags = dict.fromkeys(build.reference for build in builds)
    created = [image for build in reversed(builds) for image in reversed(build.created)]
    for image in [*tags, *created]:
        engine.remove_image(image, force=False, prune=False)  # False: gone, in use, children

"""The suite's multi-architecture images: one stack built for linux/amd64 and, under qemu,
linux/arm64, through builder's own build of several platforms.

No PyTorch index is reachable here, and PyPI's aarch64 torch is a CUDA build from 2.11
on (its libraries are GBs), so each architecture's torch comes from a base of our own
that carries it, as NVIDIA's multi-architecture PyTorch bases do (``torch: from-base``):
the CPU 2.13.0 wheel of the wheelhouse on amd64, PyPI's last CPU-only aarch64 torch
(2.10.0) on arm64. The stack on them is the cpu-deepspeed preset with DeepSpeed's ops
left out (``deepspeed_ops: []``): compiling C++ under emulation takes too long for a
test. Nothing in these builds compiles.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from builder.architectures import AMD64, ARM64, Architecture
from builder.engine.build import build_platforms, run_build
from builder.engine.progress import PlainProgress
from builder.image.inputs import load_inputs
from builder.output import OutputFile
from builder.resolved import resolve
from builder.spec.loader import Stack, load_preset
from tests.conftest import run_script
from tests.integration.images import (
    ARM64_BASE,
    BASE_IMAGE,
    CA_BUNDLE,
    MULTI_IMAGE,
    TORCH,
    TORCH_BASE,
    WHEELHOUSE,
)

if TYPE_CHECKING:
    from pathlib import Path

    from builder.engine import Engine
    from builder.engine.build import Built
    from builder.image.inputs import BuildInputs

ARM64_TORCH = "2.10.0"
"""PyPI's last aarch64 torch without CUDA (2.11 and later bring the CUDA libraries)."""
ARM64_WHEELHOUSE = WHEELHOUSE.parent / "wheels-arm64"
PLATFORMS = (AMD64.platform, ARM64.platform)
BASES = {AMD64.platform: BASE_IMAGE, ARM64.platform: ARM64_BASE}

TORCH_BASE_DOCKERFILE = """\
FROM {base}
RUN apt-get update \\
 && apt-get install -y --no-install-recommends python3 python3-pip python3-venv \\
 && rm -rf /var/lib/apt/lists/*
COPY ca.pem /tmp/ca.pem
COPY {wheel} /tmp/{wheel}
RUN PIP_CERT=/tmp/ca.pem pip3 install --break-system-packages --no-cache-dir /tmp/{wheel} \\
 && rm -f /tmp/{wheel} /tmp/ca.pem \\
 && python3 -c 'import torch; print(torch.__version__)'
"""


def arm64_torch_wheel() -> Path | None:
    """PyPI's CPU aarch64 torch, fetched once into its own wheelhouse (pip downloads a
    wheel of another platform without running anything of it)."""
    wheels = sorted(ARM64_WHEELHOUSE.glob(f"torch-{ARM64_TORCH}-*_aarch64.whl"))
    if not wheels:
        ARM64_WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                *(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"),
                *("--only-binary=:all:", "--python-version", "3.11"),
                *("--platform", "manylinux_2_28_aarch64", "--platform", "manylinux2014_aarch64"),
                *("-d", str(ARM64_WHEELHOUSE), f"torch=={ARM64_TORCH}"),
            ],
            check=False,
            capture_output=True,
        )
        wheels = sorted(ARM64_WHEELHOUSE.glob(f"torch-{ARM64_TORCH}-*_aarch64.whl"))
    return wheels[0] if wheels else None


def amd64_torch_wheel() -> Path | None:
    wheels = sorted(WHEELHOUSE.glob(f"torch-{TORCH}+cpu-*_x86_64.whl"))
    return wheels[0] if wheels else None


def build_torch_base(
    engine: Engine, architecture: Architecture, wheel: Path, *, nocache: bool = False
) -> str:
    """TORCH_BASE:ARCH: Debian's python3 with torch installed system-wide, built for
    architecture (its RUN steps under qemu on another machine)."""
    reference = f"{TORCH_BASE}:{architecture.engine}"
    text = TORCH_BASE_DOCKERFILE.format(base=BASES[architecture.platform], wheel=wheel.name)
    files = [
        OutputFile("Dockerfile", 0o644, text),
        OutputFile("ca.pem", 0o644, CA_BUNDLE.read_text()),
        OutputFile(wheel.name, 0o644, "", wheel),
    ]
    run_build(
        files,
        reference,
        log_name=f"torch-base-{architecture.engine}",
        engine=engine,
        platform=architecture.platform,
        progress=_progress(),
        nocache=nocache,
    )
    return reference


def multi_stack() -> Stack:
    """cpu-deepspeed on the torch bases, for both architectures; no compiled ops."""
    stack = load_preset("cpu-deepspeed")
    image = replace(
        stack.spec.image,
        name=MULTI_IMAGE.split(":")[0],
        tag=MULTI_IMAGE.split(":")[1],
        base=f"{TORCH_BASE}:amd64",
        torch="from-base",
        torch_index=None,
        deepspeed_ops=(),
        platforms=PLATFORMS,
    )
    return replace(stack, spec=replace(stack.spec, image=image))


def multi_inputs() -> BuildInputs:
    """The stack's build inputs: this machine's CA bundle, and arm64's own torch base
    (`--platform-base linux/arm64=...`; the spec's base is amd64's)."""
    return load_inputs(
        ca_bundle=CA_BUNDLE,
        platform_bases=(f"{ARM64.platform}={TORCH_BASE}:arm64",),
    )


def build_multi(engine: Engine) -> Built:
    """The stack for both architectures, as `builder build --platform-base` does."""
    return build_platforms(
        resolve(multi_stack(), multi_inputs()),
        reference=MULTI_IMAGE,
        engine=engine,
        progress=_progress(),
    )


def prepare_and_build(engine: Engine) -> Built:
    """Everything the stack needs, made where missing (emulation, the arm64 base, the
    torch wheels and bases), then the stack for both architectures; RuntimeError saying
    what could not be had."""
    for script, args, env in (
        ("emulation.sh", ("arm64",), None),
        ("base-image.sh", (ARM64_BASE,), {"BUILDER_BASE_ARCH": "arm64"}),
    ):
        problem = run_script(script, *args, env=env)
        if problem is not None:
            raise RuntimeError(f"scripts/{script} failed: {problem}")
    wheels = {AMD64: amd64_torch_wheel(), ARM64: arm64_torch_wheel()}
    for architecture, wheel in wheels.items():
        if wheel is None:
            raise RuntimeError(f"no CPU torch wheel for {architecture.machine} (pip download)")
        build_torch_base(engine, architecture, wheel)
    return build_multi(engine)


class _Discard(io.StringIO):
    """Where a quiet build's progress lines go."""

    def write(self, text: str) -> int:
        return len(text)


def _progress() -> PlainProgress:
    """The builds' progress lines: shown with BUILDER_TEST_VERBOSE, else dropped."""
    return PlainProgress(sys.stderr if os.environ.get("BUILDER_TEST_VERBOSE") else _Discard())

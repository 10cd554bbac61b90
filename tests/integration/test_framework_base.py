"""torch: from-base on a framework base image, built for real.

The base stands in for NGC's PyTorch images: torch in the system Python (here the CPU
torch of the suite's built image, made visible to the system Python by a path file;
its venv removed). builder must keep that torch: the venv sees the system
site-packages, DeepSpeed installs against it, a package that asks for another torch
fails the build, and the fingerprint reads the base's torch.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from builder.engine.build import build_image
from builder.engine.progress import PlainProgress
from builder.errors import BuildError
from builder.fingerprint.sources import of_image
from builder.resolved import resolve
from builder.spec.loader import Stack, load_preset
from tests.integration.images import IMAGE, TORCH

if TYPE_CHECKING:
    from collections.abc import Iterator

    from builder.engine import Engine
    from builder.engine.build import BuildResult
    from builder.image.inputs import BuildInputs
    from builder.spec.records import Spec

pytestmark = pytest.mark.integration

FRAMEWORK = "builder-test/framework:it"
REFERENCE = "builder-test/from-base:it"
FRAMEWORK_DOCKERFILE = f"""FROM {IMAGE}
RUN rm -rf /opt/venv \\
 && echo /opt/torch > /usr/lib/python3/dist-packages/framework-torch.pth \\
 && python3 -c 'import torch; print(torch.__version__)'
"""


@pytest.fixture(scope="module")
def framework(engine: Engine, cpu_image: BuildResult) -> Iterator[str]:
    """A base whose system Python has torch and no venv."""
    subprocess.run(
        ["docker", "build", "-q", "-t", FRAMEWORK, "-"],
        input=FRAMEWORK_DOCKERFILE,
        text=True,
        check=True,
        capture_output=True,
    )
    yield FRAMEWORK
    engine.remove_image(FRAMEWORK)


def from_base(framework: str, *pip: str) -> Spec:
    spec = load_preset("cpu-deepspeed").spec
    # one op compiled against the base's torch (the shared-memory one, seconds); cpu_adam's
    # minutes of compiling are the cpu image's to prove
    image = replace(
        spec.image,
        name="builder-test/from-base",
        tag="it",
        base=framework,
        torch="from-base",
        pip=tuple(pip),
        deepspeed_ops=("deepspeed_shm_comm",),
    )
    return replace(spec, image=image)


def build(spec: Spec, engine: Engine, inputs: BuildInputs) -> None:
    stack = load_preset("cpu-deepspeed")
    with open(os.devnull, "w") as sink:  # noqa: PTH123 - a text sink for the progress lines
        verbose = os.environ.get("BUILDER_TEST_VERBOSE")
        build_image(
            resolve(Stack(spec, stack.source, stack.root, None), replace(inputs, base_image=None)),
            reference=REFERENCE,
            engine=engine,
            progress=PlainProgress(sys.stderr if verbose else sink),
        )


def test_the_bases_torch_is_kept_and_read_back(
    engine: Engine, inputs: BuildInputs, framework: str
) -> None:
    build(from_base(framework), engine, inputs)
    try:
        probe = (
            "import importlib.metadata as m, torch, deepspeed; "
            "print('FILE', torch.__file__); print('VERSION', m.version('torch')); "
            "print('PIN', open('/opt/venv/base-torch.txt').read().strip())"
        )
        output = engine.run(REFERENCE, ["-c", probe], entrypoint=["/opt/venv/bin/python"])
        found = dict(
            line.split(" ", 1)
            for line in output.splitlines()
            if line[:4] in ("FILE", "VERS", "PIN ")
        )
        assert found["FILE"] == "/opt/torch/torch/__init__.py"  # the base's, not a new install
        assert found["VERSION"].startswith(TORCH)
        assert found["PIN"] == f"torch=={found['VERSION']}"
        listing = engine.run(
            REFERENCE, ["-c", "ls /opt/venv/lib/python3*/site-packages"], entrypoint=["/bin/sh"]
        )
        assert "torch\n" not in listing
        assert of_image(engine, REFERENCE).data["torch"]["version"] == found["VERSION"]
    finally:
        engine.remove_image(REFERENCE)


def test_a_package_that_wants_another_torch_fails_the_build(
    engine: Engine, inputs: BuildInputs, framework: str
) -> None:
    with pytest.raises(BuildError) as failed:
        build(from_base(framework, "torch==2.12.0"), engine, inputs)
    # pip's resolver: the requirement against the base's pin, before anything is fetched
    assert "The user requested (constraint) torch==" in str(failed.value), failed.value
    assert not engine.exists(REFERENCE)

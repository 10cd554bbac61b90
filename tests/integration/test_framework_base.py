"""torch: from-base on a framework base image, built for real.

The base stands in for NGC's PyTorch images: torch in the system Python (here the CPU
torch of the suite's built image, made visible to the system Python by a path file;
its venv removed). builder must keep that torch: the venv sees the system
site-packages, DeepSpeed installs against it, a package that asks for another torch
fails the build, and the fingerprint reads the base's torch. And the fabric's verbs
libraries a framework base carries are used as they are, never installed a second time.
"""

from __future__ import annotations

import io
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


# -- image.fabric on a framework base: the base's verbs libraries are used, not doubled --
#
# NGC's PyTorch images carry rdma-core (56.0 in 26.03). The stand-in: the framework base
# above with Debian's verbs libraries and providers installed (not ibverbs-utils, which
# fabric: infiniband would add on a base without them). The fabric's step must find them
# and install nothing; on a base with half of them it must stop and say so.

VERBS_BASE = "builder-test/framework-verbs:it"
HALF_BASE = "builder-test/framework-half-verbs:it"
FABRIC_REFERENCE = "builder-test/from-base-fabric:it"
INSTALL = (
    "apt-get update && apt-get install -y --no-install-recommends {} && rm -rf /var/lib/apt/lists/*"
)
VERBS_DPKG = [
    "dpkg-query",
    "-W",
    "-f",
    "${Package} ${Version}\\n",
    "ibverbs-*",
    "lib*verbs*",
    "librdmacm*",
]


@pytest.fixture(scope="module")
def verbs_bases(engine: Engine, framework: str) -> Iterator[tuple[str, str]]:
    """Two framework bases: one with libibverbs1 only, one with the verbs libraries and
    their providers (libibverbs1, librdmacm1, ibverbs-providers)."""
    half = f"FROM {framework}\nRUN {INSTALL.format('libibverbs1')}\n"
    full = f"FROM {HALF_BASE}\nRUN {INSTALL.format('ibverbs-providers librdmacm1')}\n"
    try:
        for reference, dockerfile in ((HALF_BASE, half), (VERBS_BASE, full)):
            subprocess.run(
                ["docker", "build", "-q", "-t", reference, "-"],
                input=dockerfile,
                text=True,
                check=True,
                capture_output=True,
            )
        yield VERBS_BASE, HALF_BASE
    finally:
        for reference in (VERBS_BASE, HALF_BASE):
            if engine.exists(reference):
                engine.remove_image(reference)


def with_infiniband(base: str) -> Spec:
    """A torchrun image on base with fabric: infiniband: no DeepSpeed, sshd or pdsh, so
    that the fabric's step is what the build is about."""
    spec = load_preset("cpu-deepspeed").spec
    image = replace(
        spec.image,
        name="builder-test/from-base-fabric",
        tag="it",
        base=base,
        torch="from-base",
        fabric="infiniband",
        deepspeed=None,
        deepspeed_ops=None,
        pdsh=False,
        ssh=replace(spec.image.ssh, enabled=False),
    )
    return replace(spec, image=image, launch=replace(spec.launch, launcher="torchrun"))


def build_logged(spec: Spec, engine: Engine, inputs: BuildInputs) -> str:
    """Build spec (no cache: every step runs and logs) and return the build's log."""
    stack = load_preset("cpu-deepspeed")
    log = io.StringIO()
    build_image(
        resolve(Stack(spec, stack.source, stack.root, None), replace(inputs, base_image=None)),
        reference=FABRIC_REFERENCE,
        engine=engine,
        nocache=True,
        progress=PlainProgress(log),
    )
    return log.getvalue()


def test_the_verbs_libraries_of_a_framework_base_are_kept(
    engine: Engine, inputs: BuildInputs, verbs_bases: tuple[str, str]
) -> None:
    full, _ = verbs_bases
    try:
        log = build_logged(with_infiniband(full), engine, inputs)
        assert (
            "the verbs libraries (rdma-core): the base has libibverbs.so.1 librdmacm.so.1; "
            "none installed"
        ) in log, log
        before = engine.run(full, VERBS_DPKG[1:], entrypoint=[VERBS_DPKG[0]])
        after = engine.run(FABRIC_REFERENCE, VERBS_DPKG[1:], entrypoint=[VERBS_DPKG[0]])
        assert after == before  # the same packages at the same versions: none added
        assert "ibverbs-utils" not in after  # what the fabric installs on a bare base
        probe = "ldconfig -p | grep -c 'libibverbs\\.so\\.1 '; echo NCCL_NET=${NCCL_NET:-unset}"
        lines = engine.run(FABRIC_REFERENCE, ["-c", probe], entrypoint=["/bin/sh"]).split()
        assert lines == ["1", "NCCL_NET=unset"]  # one libibverbs, known to the loader
    finally:
        if engine.exists(FABRIC_REFERENCE):
            engine.remove_image(FABRIC_REFERENCE)


def test_a_framework_base_with_half_the_verbs_libraries_fails_the_build(
    engine: Engine, inputs: BuildInputs, verbs_bases: tuple[str, str]
) -> None:
    _, half = verbs_bases
    with pytest.raises(BuildError) as failed:
        build_logged(with_infiniband(half), engine, inputs)
    message = str(failed.value)
    assert "the base has libibverbs.so.1 but not librdmacm.so.1" in message, message
    assert not engine.exists(FABRIC_REFERENCE)

"""image.fabric: infiniband, built for real. The RDMA userspace must be known to the
loader (where NCCL, RCCL, UCX and OpenMPI open it) and its tools must run: this machine
has no HCA, so ibv_devices finds none, which is fine; a missing library is not."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from builder.engine.build import build_image
from builder.engine.progress import PlainProgress
from builder.spec.loader import Stack, load_preset

if TYPE_CHECKING:
    from builder.engine import Engine
    from builder.image.inputs import BuildInputs

pytestmark = pytest.mark.integration

REFERENCE = "builder-test/fabric:it"
PROBE = """
ldconfig -p | grep -oE '(libibverbs|librdmacm)\\.so\\.1 ' | sort -u
ibv_devices >/dev/null 2>&1; echo "ibv_devices exit $?"
command -v ibv_devinfo
echo "NCCL_NET=${NCCL_NET:-unset}"
"""


def test_an_infiniband_image_has_the_rdma_userspace(engine: Engine, inputs: BuildInputs) -> None:
    """The cpu stack without DeepSpeed and sshd (a torchrun image): the fabric's layer is
    what this test is about, and the rest stays small."""
    stack = load_preset("cpu-deepspeed")
    image = replace(
        stack.spec.image,
        name="builder-test/fabric",
        tag="it",
        fabric="infiniband",
        deepspeed=None,
        deepspeed_ops=None,
        pdsh=False,
        ssh=replace(stack.spec.image.ssh, enabled=False),
    )
    spec = replace(stack.spec, image=image, launch=replace(stack.spec.launch, launcher="torchrun"))
    with open(os.devnull, "w") as sink:  # noqa: PTH123 - a text sink for the progress lines
        verbose = os.environ.get("BUILDER_TEST_VERBOSE")
        build_image(
            Stack(spec, stack.source, stack.root, None),
            inputs,
            reference=REFERENCE,
            engine=engine,
            progress=PlainProgress(sys.stderr if verbose else sink),
        )
    try:
        out = engine.run(REFERENCE, ["-c", PROBE], entrypoint=["/bin/sh"]).split("\n")
        assert "libibverbs.so.1 " in out
        assert "librdmacm.so.1 " in out
        # 0: no device listed; 1: no RDMA subsystem in this kernel. 127 would be no tool.
        assert any(line in ("ibv_devices exit 0", "ibv_devices exit 1") for line in out), out
        assert "/usr/bin/ibv_devinfo" in out
        assert "NCCL_NET=unset" in out  # the cpu platform has no NCCL: nothing baked in
    finally:
        engine.remove_image(REFERENCE)

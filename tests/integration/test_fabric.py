"""image.fabric: infiniband, built for real. The RDMA userspace must be known to the
loader (where NCCL, RCCL, UCX and OpenMPI open it) and its tools must run: this machine
has no HCA, so ibv_devices finds none, which is fine; a missing library is not."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from builder.engine import Engine

pytestmark = pytest.mark.integration

PROBE = """
ldconfig -p | grep -oE '(libibverbs|librdmacm)\\.so\\.1 ' | sort -u
ibv_devices >/dev/null 2>&1; echo "ibv_devices exit $?"
command -v ibv_devinfo
echo "NCCL_NET=${NCCL_NET:-unset}"
"""


def test_an_infiniband_image_has_the_rdma_userspace(engine: Engine, fabric_image: str) -> None:
    """The fabric image (tests/integration/images.py fabric_stack): the cpu stack with
    image.fabric: infiniband, without DeepSpeed and sshd."""
    out = engine.run(fabric_image, ["-c", PROBE], entrypoint=["/bin/sh"]).split("\n")
    assert "libibverbs.so.1 " in out
    assert "librdmacm.so.1 " in out
    # 0: no device listed; 1: no RDMA subsystem in this kernel. 127 would be no tool.
    assert any(line in ("ibv_devices exit 0", "ibv_devices exit 1") for line in out), out
    assert "/usr/bin/ibv_devinfo" in out
    assert "NCCL_NET=unset" in out  # the cpu platform has no NCCL: nothing baked in

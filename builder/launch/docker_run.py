"""`docker run` for one node, with what its accelerator needs.

CUDA: all GPUs, host IPC, unlimited memlock and a large stack (NCCL breaks
on Docker's 64 MB /dev/shm). Gaudi: the habana runtime and its variables,
sys_nice, host IPC. Everyone: host networking, so the collectives and sshd
(on its own port, not 22) talk node to node; the cluster folder read-only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.errors import UsageError
from builder.rootfs import CLUSTER_DIR
from builder.stacks import AWS_EFA_FLAGS, DOCKER_RUN_FLAGS, INFINIBAND_FLAGS

if TYPE_CHECKING:
    from builder.spec import Spec


def container_name(spec: Spec) -> str:
    return f"builder-{spec.name}"


def docker_run_argv(
    spec: Spec,
    *,
    image: str,
    cluster_dir: str | None,
    command: list[str] | None = None,
    infiniband: bool = False,
    aws_efa: bool = False,
) -> list[str]:
    """The command that starts spec's container on one node (detached)."""
    argv = ["docker", "run", "--detach", "--name", container_name(spec), "--network", "host"]
    argv += DOCKER_RUN_FLAGS[spec.image.accelerator]
    if infiniband:
        argv += INFINIBAND_FLAGS
    if aws_efa:
        argv += AWS_EFA_FLAGS
    if cluster_dir is not None:
        argv += ["--volume", _bind(cluster_dir, CLUSTER_DIR, read_only=True)]
    for mount in spec.launch.mounts:
        argv += ["--volume", _bind(mount.source, mount.target, read_only=mount.read_only)]
    for key, value in sorted(spec.launch.env.items()):
        argv += ["--env", f"{key}={value}"]
    return [*argv, image, *(command or [])]


def _bind(source: str, target: str, *, read_only: bool) -> str:
    for path in (source, target):
        if ":" in path:
            raise UsageError(f"mount path {path!r} holds ':', which `docker run -v` cannot carry")
    return f"{source}:{target}" + (":ro" if read_only else "")

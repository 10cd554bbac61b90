"""NVIDIA CUDA: nvidia/cuda devel bases, torch from PyTorch's CUDA wheel indexes.

The base is devel without cuDNN: the torch wheels bring their own cuDNN (the
nvidia-cudnn-cu12/cu13 packages), and devel keeps nvcc and the headers that
DeepSpeed's just-in-time ops compile against.

Containers get every GPU, host IPC, unlimited memlock and a large stack
(NCCL breaks on Docker's 64 MB /dev/shm); Apptainer gets ``--nv``; Slurm
asks for one GPU per slot unless the spec says otherwise.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from builder.model import Extra
from builder.platforms.base import (
    TORCH_INDEX_ROOT,
    VERSION_PATTERN,
    Platform,
    Problems,
    minor_of,
    wheel_problems,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from builder.spec.records import ImageSpec

# torch minor -> CUDA wheel indexes on download.pytorch.org that carry it
# (PyTorch's previous-versions page and RELEASE.md compatibility matrix).
# 2.14: RELEASE.md's 2.14 row (pytorch/pytorch#194367): CUDA 12.6 legacy, 13.0,
# 13.2 (PyPI). 2.15: the 2.15 CUDA support matrix RFC (pytorch/pytorch#190385) and
# the dev-discuss notice "CUDA 12.6 wheels will no longer be published from PyTorch
# 2.15" (builds removed in pytorch/test-infra#8739): 13.0 and 13.2 (PyPI) only.
TORCH_CUDA_INDEXES: dict[str, tuple[str, ...]] = {
    "2.1": ("cu118", "cu121"),
    "2.2": ("cu118", "cu121"),
    "2.3": ("cu118", "cu121"),
    "2.4": ("cu118", "cu121", "cu124"),
    "2.5": ("cu118", "cu121", "cu124"),
    "2.6": ("cu118", "cu124", "cu126"),
    "2.7": ("cu118", "cu126", "cu128"),
    "2.8": ("cu126", "cu128", "cu129"),
    "2.9": ("cu126", "cu128", "cu130"),
    "2.10": ("cu126", "cu128", "cu130"),
    "2.11": ("cu126", "cu128", "cu130"),
    "2.12": ("cu126", "cu130", "cu132"),
    "2.13": ("cu126", "cu130", "cu132"),
    "2.14": ("cu126", "cu130", "cu132"),
    "2.15": ("cu130", "cu132"),
}

# nvidia/cuda X.Y.Z-devel-OS tags NVIDIA still publishes (its supported-tags
# list; older tags are deleted after the driver's end of life). NVIDIA builds each
# cudnn-devel tag on the devel tag of the same version and OS.
CUDA_DEVEL_TAGS: dict[str, tuple[str, ...]] = {
    "12.4.1": ("ubuntu22.04",),
    "12.6.3": ("ubuntu22.04", "ubuntu24.04"),
    "12.9.1": ("ubuntu22.04", "ubuntu24.04"),
    "13.0.3": ("ubuntu22.04", "ubuntu24.04"),
    "13.1.2": ("ubuntu22.04", "ubuntu24.04"),
    "13.2.1": ("ubuntu22.04", "ubuntu24.04"),
}
DEFAULT_CUDA = "13.2.1"
DEFAULT_OS = "ubuntu24.04"  # Python 3.12: torch 2.15 has no wheels for 22.04's 3.10


def torch_cuda_index(torch: str, cuda: str) -> str | None:
    """The CUDA wheel index for torch on a CUDA base: same major, newest minor <= the base's.

    The wheels bring their own CUDA runtime; the base's toolkit must match
    torch's CUDA major for extensions (DeepSpeed's ops) to compile.
    """
    major, minor = (int(part) for part in cuda.split(".")[:2])
    fitting = [
        tag
        for tag in TORCH_CUDA_INDEXES.get(minor_of(torch), ())
        if int(tag[2:-1]) == major and int(tag[-1]) <= minor
    ]
    return max(fitting, key=lambda tag: int(tag[-1]), default=None)


class Cuda(Platform):
    """NVIDIA GPUs."""

    name = "cuda"
    version_keys = (
        Extra("cuda", "CUDA toolkit version (cuda only), e.g. 13.2.1.", VERSION_PATTERN),
    )
    hashed_when_unset = ("cuda",)
    base_family = re.compile(r"(^|/)(nvidia/cuda|nvcr\.io/nvidia/)|cuda", re.IGNORECASE)
    default_os = DEFAULT_OS
    docker_flags = (
        "--gpus", "all", "--ipc", "host",
        "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
    )  # fmt: skip
    apptainer_flags = ("--nv",)
    gpus_per_slot = True
    rehearsal_env = (("DS_ACCELERATOR", "cpu"),)
    collective = "nccl"
    torch_device = "cuda"
    torch_backend = "nccl"
    device_word = "GPU"
    socket_variables = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")

    def default_base(self, image: ImageSpec) -> str:
        cuda = image.versions.get("cuda", DEFAULT_CUDA)
        return f"nvidia/cuda:{cuda}-devel-{image.os or DEFAULT_OS}"

    def torch_index(self, image: ImageSpec) -> str | None:
        if image.torch_index:
            return image.torch_index
        cuda = image.versions.get("cuda", DEFAULT_CUDA)
        return f"{TORCH_INDEX_ROOT}/{torch_cuda_index(image.torch or '', cuda)}"

    def problems(self, image: ImageSpec) -> Problems:
        problems: Problems = []
        cuda = image.versions.get("cuda", DEFAULT_CUDA)
        if image.base is None:
            oses = CUDA_DEVEL_TAGS.get(cuda)
            if oses is None:
                problems.append(
                    (
                        "image.cuda",
                        f"nvidia/cuda has no {cuda}-devel image (any more); use one of "
                        f"{', '.join(CUDA_DEVEL_TAGS)} or set image.base",
                    )
                )
            elif (image.os or DEFAULT_OS) not in oses:
                problems.append(
                    ("image.os", f"nvidia/cuda {cuda}-devel exists for {', '.join(oses)}")
                )
        return problems + super().problems(image) + wheel_problems(
            image, key="cuda", toolkit=cuda, table=TORCH_CUDA_INDEXES, choose=torch_cuda_index,
            kind="CUDA",
        )  # fmt: skip

    def torch_build(self, torch: Mapping[str, object], packages: Mapping[str, str]) -> str | None:  # noqa: ARG002
        return f"CUDA {torch['cuda']}" if torch.get("cuda") else None


PLATFORM = Cuda()

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

from builder.architectures import ARM64
from builder.collectives import nccl
from builder.deepspeed_ops import OPS
from builder.model import Extra
from builder.platforms._gpu import WheelIndexedGpu
from builder.platforms.base import FROM_BASE, VERSION_PATTERN, Problems, minor_of, version_key

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

FIRST_AARCH64_CUDA_TORCH = "2.7"
"""The first torch with linux aarch64 (sbsa) CUDA wheels on PyTorch's indexes (cu128,
PR pytorch/pytorch#146378; PyPI's own aarch64 wheels are CUDA builds from 2.11)."""

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

# compute capability -> (the first CUDA release whose nvcc compiles for it, the first
# that no longer does), from NVIDIA's CUDA Toolkit release notes (13.0 removed
# offline compilation for Maxwell, Pascal and Volta) and torch's cpp_extension list of
# supported architectures (torch/utils/cpp_extension.py, _get_cuda_arch_flags).
CUDA_ARCHS: dict[str, tuple[str, str | None]] = {
    "5.0": ("6.0", "13.0"),
    "5.2": ("7.0", "13.0"),
    "5.3": ("7.0", "13.0"),
    "6.0": ("8.0", "13.0"),
    "6.1": ("8.0", "13.0"),
    "6.2": ("8.0", "13.0"),
    "7.0": ("9.0", "13.0"),
    "7.2": ("10.0", "13.0"),
    "7.5": ("10.0", None),
    "8.0": ("11.0", None),
    "8.6": ("11.1", None),
    "8.7": ("11.4", None),
    "8.9": ("11.8", None),
    "9.0": ("11.8", None),
    "10.0": ("12.8", None),
    "10.3": ("12.9", None),
    "11.0": ("13.0", None),
    "12.0": ("12.8", None),
    "12.1": ("12.9", None),
}
NAMED_ARCHS = {
    "maxwell": "5.0",
    "pascal": "6.0",
    "volta": "7.0",
    "turing": "7.5",
    "ampere": "8.0",
    "ada": "8.9",
    "hopper": "9.0",
    "blackwell": "10.0",
}
"""torch's named architectures, which DeepSpeed's op builder cannot read (int("Hopper"))."""
DEEPSPEED_CUDA_MINORS = {
    "11": ("11.0", "11.1", "11.2", "11.3", "11.4", "11.5", "11.6", "11.7", "11.8"),
    "12": ("12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9"),
}
"""DeepSpeed 0.19's op builder (cuda_minor_mismatch_ok): toolkits whose nvcc may differ
from torch's CUDA in the minor version. Any other difference stops every op's compile
with CUDAMismatchException; CUDA 13 has no entry."""
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


class Cuda(WheelIndexedGpu):
    """NVIDIA GPUs."""

    name = "cuda"
    # NVIDIA/k8s-device-plugin v0.20.0: internal/lm/mig-strategy.go (resourceName), README
    kubernetes_resource = "nvidia.com/gpu"
    device_variables = ("CUDA_VISIBLE_DEVICES",)  # Slurm's gpu/nvml
    version_keys = (
        Extra("cuda", "CUDA toolkit version (cuda only), e.g. 13.2.1.", VERSION_PATTERN),
    )
    hashed_when_unset = ("cuda",)
    base_family = re.compile(r"(^|/)(nvidia/cuda|nvcr\.io/nvidia/)|cuda", re.IGNORECASE)
    toolkit_key = "cuda"
    default_toolkit = DEFAULT_CUDA
    default_os = DEFAULT_OS
    devel_tags = CUDA_DEVEL_TAGS
    wheel_indexes = TORCH_CUDA_INDEXES
    wheel_kind = "CUDA"
    choose_index = torch_cuda_index
    docker_flags = (
        "--gpus",
        "all",
        "--ipc",
        "host",
        "--ulimit",
        "memlock=-1",
        "--ulimit",
        "stack=67108864",
    )
    apptainer_flags = ("--nv",)
    # NVIDIA's IMEX guide (channels: /dev/nvidia-caps-imex-channels/channelN, made by the
    # driver's NVreg_CreateImexChannel0=1 or mknod); the Container Toolkit creates the
    # channels NVIDIA_IMEX_CHANNELS lists in a container (v1.15.0, NVIDIA/nvidia-container-
    # toolkit@296d456; "all" is not taken: internal/config/image/cuda_image.go); NCCL 2.30:
    # NCCL_MNNVL_ENABLE default 2 (auto), 1 forces it (src/init.cc), and MNNVL needs cuMem
    # (src/mnnvl.cc: "MNNVL requires cuMem to be enabled"); GB200 needs NCCL >= 2.25.2
    # (NVIDIA's multi-node NVLink tuning guide).
    mnnvl_env = (
        ("NVIDIA_IMEX_CHANNELS", "0"),
        ("NCCL_MNNVL_ENABLE", "1"),
        ("NCCL_CUMEM_ENABLE", "1"),
    )
    mnnvl_binds = ("/dev/nvidia-caps-imex-channels",)
    collective = nccl.COLLECTIVE
    env_prefixes = ("CUDA_", "NVIDIA_")
    deepspeed_ops = tuple(sorted(name for name in OPS if name != "deepspeed_shm_comm"))
    default_deepspeed_ops = ("cpu_adam", "fused_adam")
    arch_variable = "TORCH_CUDA_ARCH_LIST"

    def default_archs(self, image: ImageSpec) -> tuple[str, ...]:
        """A100 and H100 (8.0 also runs on 8.6 and 8.9), and B200 where the toolkit has it;
        an aarch64-only image: GH200 (9.0) and GB200 (10.0), Grace's only GPUs."""
        cuda = _toolkit(image)
        blackwell = cuda is not None and version_key(cuda) >= version_key("12.8")
        if image.platforms == (ARM64.platform,):
            return ("9.0", "10.0") if blackwell else ("9.0",)
        return ("8.0", "9.0", "10.0") if blackwell else ("8.0", "9.0")

    def problems(self, image: ImageSpec) -> Problems:
        problems = super().problems(image)
        torch = image.torch
        arm = ARM64.platform in (image.platforms or ())
        old = (
            arm
            and torch
            and torch != FROM_BASE
            and not image.torch_index
            and version_key(minor_of(torch)) < version_key(FIRST_AARCH64_CUDA_TORCH)
        )
        if old:
            problems.append(
                (
                    "image.torch",
                    f"torch {torch} has no aarch64 CUDA wheels (PyTorch publishes them "
                    f"from {FIRST_AARCH64_CUDA_TORCH}, on its cu128 index and later): "
                    f"use torch {FIRST_AARCH64_CUDA_TORCH} or newer for linux/arm64",
                )
            )
        return problems

    def arch_problems(self, archs: tuple[str, ...], image: ImageSpec) -> Problems:
        problems: Problems = []
        cuda = _toolkit(image)
        for index, arch in enumerate(archs):
            where = f"image.archs[{index}]"
            match = re.fullmatch(r"(\d+)\.(\d+)([a-z]?)(\+PTX)?", arch)
            named = NAMED_ARCHS.get(arch.split("+")[0].lower())
            if match is None:
                fix = f"use {named}" if named else "e.g. 9.0, or 9.0+PTX to add PTX"
                problems.append(
                    (
                        where,
                        f"{arch} is not a CUDA compute capability X.Y (DeepSpeed's op builder "
                        f"reads numbers only): {fix}",
                    )
                )
                continue
            plain = f"{match[1]}.{match[2]}"
            if match[3]:
                problems.append(
                    (
                        where,
                        f"{arch}: DeepSpeed 0.19's op builder reads the minor version as a "
                        "number and stops with ValueError: invalid literal for int() with base "
                        f"10: '{match[2]}{match[3]}'; its kernels use no {plain}{match[3]}-only "
                        f"instructions: use {plain}{match[4] or ''}",
                    )
                )
            elif plain not in CUDA_ARCHS:
                problems.append(
                    (
                        where,
                        f"{arch}: builder knows no NVIDIA GPU of compute capability {plain}; "
                        f"choose from {', '.join(CUDA_ARCHS)}",
                    )
                )
            elif cuda is not None:
                problems += _toolkit_arch_problems(where, arch, plain, cuda)
        return problems

    def default_base(self, image: ImageSpec) -> str:
        return f"nvidia/cuda:{self.toolkit(image)}-devel-{image.os or DEFAULT_OS}"

    def no_devel_image(self, toolkit: str) -> str:
        return (
            f"nvidia/cuda has no {toolkit}-devel image (any more); use one of "
            f"{', '.join(CUDA_DEVEL_TAGS)} or set image.base"
        )

    def devel_image(self, toolkit: str) -> str:
        return f"nvidia/cuda {toolkit}-devel"

    def toolkit_problems(self, image: ImageSpec) -> Problems:
        return _toolkit_problems(image)

    def torch_build(self, torch: Mapping[str, object], packages: Mapping[str, str]) -> str | None:  # noqa: ARG002
        return f"CUDA {torch['cuda']}" if torch.get("cuda") else None


def _toolkit(image: ImageSpec) -> str | None:
    """The CUDA toolkit of the image's base: image.cuda, or the default base's; None for
    a base named by the user without image.cuda."""
    if "cuda" in image.versions:
        return image.versions["cuda"]
    return DEFAULT_CUDA if image.base is None else None


def _toolkit_arch_problems(where: str, arch: str, plain: str, cuda: str) -> Problems:
    first, gone = CUDA_ARCHS[plain]
    if version_key(cuda) < version_key(first):
        why = f"{arch} needs CUDA {first} or newer; the image's toolkit is {cuda}"
        return [(where, f"{why}: raise image.cuda or drop {arch}")]
    if gone is not None and version_key(cuda) >= version_key(gone):
        why = f"CUDA {gone} and newer no longer compile for {plain} (the toolkit is {cuda})"
        return [(where, f"{why}: drop it, or use a CUDA 12 toolkit")]
    return []


def _toolkit_problems(image: ImageSpec) -> Problems:
    """DeepSpeed compiles its ops (at build time or at first use) only with an nvcc of
    torch's CUDA major.minor, or one its op builder lists as compatible."""
    cuda = _toolkit(image)
    if not image.deepspeed or cuda is None or image.torch_index or not image.torch:
        return []
    index = torch_cuda_index(image.torch, cuda)
    if index is None:
        return []  # wheel_problems names this one
    torch_cuda = f"{index[2:-1]}.{index[-1]}"
    nvcc = minor_of(cuda)
    major = nvcc.split(".")[0]
    allowed = DEEPSPEED_CUDA_MINORS.get(major, ())
    if nvcc == torch_cuda or (nvcc in allowed and torch_cuda in allowed):
        return []
    return [
        (
            "image.cuda",
            f"DeepSpeed compiles its ops only when the toolkit's CUDA ({nvcc}) is torch's "
            f"({torch_cuda}, the {index} wheels) or a minor it lists as compatible (none for "
            f"CUDA {major}); every op would stop with CUDAMismatchException. Use a "
            f"{torch_cuda} toolkit (image.cuda), or a torch with {nvcc.replace('.', '')} wheels",
        )
    ]


PLATFORM = Cuda()

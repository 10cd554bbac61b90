"""AMD ROCm: rocm/dev-ubuntu bases (hipcc for DeepSpeed's just-in-time ops), torch from
PyTorch's ROCm wheel indexes, RCCL (which reads the NCCL_* variables).

Sources, as published (none of it was run on ROCm hardware here):
- wheel indexes per torch release: PyTorch's RELEASE.md compatibility matrix and
  .github/scripts/generate_binary_build_matrix.py (ROCM_ARCHES of each release;
  the index is ``rocm`` + that string verbatim: rocm6.2.4, but rocm6.3);
- bases: ROCm/ROCm-docker's dev/Dockerfile-ubuntu-22.04 and -24.04 (root,
  ROCm under /opt/rocm, Ubuntu's python3), tags as AMD's docs use them;
- container flags: AMD's "Running ROCm Docker containers" (/dev/kfd, /dev/dri,
  seccomp=unconfined) and its ML container pages (video group, host IPC);
- Apptainer: ``--rocm`` (Apptainer's GPU guide, "AMD GPUs & ROCm");
- HSA_FORCE_FINE_GRAIN_PCIE=1: RCCL's usage tips, for peer-to-peer on PCIe (RCCL
  warns without it). DeepSpeed forwards NCCL_* to the other nodes, not HSA_*, so
  it travels in .deepspeed_env with the rest of the run's environment;
- Slurm: AMD GPUs are GRES gpu like NVIDIA's (AutoDetect=rsmi): --gpus-per-node.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from builder.collectives import rccl
from builder.model import Extra
from builder.platforms._gpu import WheelIndexedGpu
from builder.platforms.base import VERSION_PATTERN, Problems, minor_of, version_key

if TYPE_CHECKING:
    from collections.abc import Mapping

    from builder.spec.records import ImageSpec

# torch minor -> ROCm wheel indexes on download.pytorch.org that carry it.
TORCH_ROCM_INDEXES: dict[str, tuple[str, ...]] = {
    "2.2": ("rocm5.6", "rocm5.7"),
    "2.3": ("rocm5.7", "rocm6.0"),
    "2.4": ("rocm6.1",),
    "2.5": ("rocm6.1", "rocm6.2"),
    "2.6": ("rocm6.1", "rocm6.2.4"),
    "2.7": ("rocm6.2.4", "rocm6.3"),
    "2.8": ("rocm6.3", "rocm6.4"),
    "2.9": ("rocm6.3", "rocm6.4"),
    "2.10": ("rocm7.0", "rocm7.1"),
    "2.11": ("rocm7.1", "rocm7.2"),
    "2.12": ("rocm7.1", "rocm7.2"),
    "2.13": ("rocm7.1", "rocm7.2"),
    "2.14": ("rocm7.2", "rocm7.14"),
}

# gfx targets of AMD's data-centre and workstation GPUs that ROCm 6 and 7 compile for
# (AMD's "GPU hardware specifications" and ROCm's supported-GPU lists).
# target -> (the first ROCm that compiles for it, the first that no longer does), where
# known: ROCm 7.0.0 added gfx950 (MI350) and removed gfx940 and gfx941 (LLVM dropped
# them for gfx942; hipFFT's and LLVM's release notes).
ROCM_ARCHS: dict[str, tuple[str | None, str | None]] = {
    "gfx900": (None, None),
    "gfx906": (None, None),
    "gfx908": (None, None),
    "gfx90a": (None, None),
    "gfx940": (None, "7.0"),
    "gfx941": (None, "7.0"),
    "gfx942": (None, None),
    "gfx950": ("7.0", None),
    "gfx1030": (None, None),
    "gfx1100": (None, None),
    "gfx1101": (None, None),
    "gfx1102": (None, None),
    "gfx1200": (None, None),
    "gfx1201": (None, None),
}
GFX_FEATURES = ("xnack+", "xnack-", "sramecc+", "sramecc-")
"""What PYTORCH_ROCM_ARCH may add to a target (gfx90a:xnack-)."""

# rocm/dev-ubuntu-XX.04:TAG images AMD's docs and its Dockerfiles use (Docker Hub
# itself cannot be listed from here; name another with image.base).
ROCM_DEV_TAGS: dict[str, tuple[str, ...]] = {
    "6.2.4": ("ubuntu22.04",),
    "6.3.4": ("ubuntu22.04",),
    "6.4.1": ("ubuntu22.04", "ubuntu24.04"),
    "7.2": ("ubuntu22.04", "ubuntu24.04"),
}
DEFAULT_ROCM = "7.2"
DEFAULT_OS = "ubuntu22.04"


def torch_rocm_index(torch: str, rocm: str) -> str | None:
    """The ROCm wheel index for torch on a ROCm base: the newest whose ROCm (major.minor)
    is the base's or older within its major, so DeepSpeed's ops, built by the base's
    hipcc, match the HIP that torch was built with."""
    base = version_key(rocm)[:2]
    fitting = [
        index
        for index in TORCH_ROCM_INDEXES.get(minor_of(torch), ())
        if version_key(index)[0] == base[0] and version_key(index)[:2] <= base
    ]
    return max(fitting, key=version_key, default=None)


def _os_tag(os_name: str) -> str:
    """ubuntu22.04 -> ubuntu-22.04, as the rocm/dev images are named."""
    return re.sub(r"^ubuntu", "ubuntu-", os_name)


class Rocm(WheelIndexedGpu):
    """AMD Instinct and Radeon GPUs."""

    name = "rocm"
    # ROCm/k8s-device-plugin v1.31.0.10: internal/pkg/plugin/plugin.go (namespace amd.com),
    # cmd/k8s-device-plugin/main.go (resource gpu), example/pod/*.yaml
    kubernetes_resource = "amd.com/gpu"
    # Slurm's gpu/rsmi sets ROCR_VISIBLE_DEVICES; a site or user may narrow with HIP's
    device_variables = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
    version_keys = (
        Extra("rocm", "ROCm release of the base (rocm only), e.g. 7.2.", VERSION_PATTERN),
    )
    base_family = re.compile(r"(^|/)rocm/|rocm", re.IGNORECASE)
    architectures = ("linux/amd64",)
    architectures_why = (
        "AMD supports ROCm on x86_64 only, and PyTorch's ROCm wheels and the rocm/dev "
        "base images are x86_64 builds"
    )
    toolkit_key = "rocm"
    default_toolkit = DEFAULT_ROCM
    default_os = DEFAULT_OS
    devel_tags = ROCM_DEV_TAGS
    wheel_indexes = TORCH_ROCM_INDEXES
    wheel_kind = "ROCm"
    choose_index = torch_rocm_index
    docker_flags = (
        "--device",
        "/dev/kfd",
        "--device",
        "/dev/dri",
        "--group-add",
        "video",
        "--security-opt",
        "seccomp=unconfined",
        "--ipc",
        "host",
    )
    apptainer_flags = ("--rocm",)
    collective = rccl.COLLECTIVE
    env_prefixes = ("HSA_", "HIP_", "ROCR_")
    # Without a GPU in the build, DeepSpeed's op builder guesses a wavefront of 32, which
    # the kernels of its inference, quantizer and random_ltd ops read (gfx90a and gfx942
    # run 64): only ops that do not read it are built in.
    deepspeed_ops = ("cpu_adagrad", "cpu_adam", "cpu_lion", "fused_adam", "fused_lamb")
    default_deepspeed_ops = ("cpu_adam", "fused_adam")
    arch_variable = "PYTORCH_ROCM_ARCH"

    def default_archs(self, image: ImageSpec) -> tuple[str, ...]:  # noqa: ARG002
        """MI200 and MI300."""
        return ("gfx90a", "gfx942")

    def arch_problems(self, archs: tuple[str, ...], image: ImageSpec) -> Problems:
        rocm = image.versions.get("rocm", DEFAULT_ROCM if image.base is None else None)
        problems: Problems = []
        for index, arch in enumerate(archs):
            where = f"image.archs[{index}]"
            target, *features = arch.split(":")
            odd = [f for f in features if f not in GFX_FEATURES]
            if target not in ROCM_ARCHS:
                problems.append(
                    (
                        where,
                        f"{arch} is not an AMD GPU target builder knows; choose from "
                        f"{', '.join(ROCM_ARCHS)} (the gfx name rocminfo shows)",
                    )
                )
            elif odd:
                problems.append(
                    (
                        where,
                        f"{arch}: {', '.join(odd)} is not a target feature; a target may "
                        f"carry {', '.join(GFX_FEATURES)} (e.g. gfx90a:xnack-)",
                    )
                )
            elif rocm is not None:
                first, gone = ROCM_ARCHS[target]
                if first and version_key(rocm) < version_key(first):
                    problems.append(
                        (where, f"{target} needs ROCm {first} or newer; the base has {rocm}")
                    )
                elif gone and version_key(rocm) >= version_key(gone):
                    problems.append(
                        (
                            where,
                            f"ROCm {gone} and newer no longer compile for {target} (the base "
                            f"has {rocm}): use gfx942, the MI300's target",
                        )
                    )
        return problems

    def default_base(self, image: ImageSpec) -> str:
        return f"rocm/dev-{_os_tag(image.os or DEFAULT_OS)}:{self.toolkit(image)}"

    def no_devel_image(self, toolkit: str) -> str:
        return (
            f"builder knows no rocm/dev image for ROCm {toolkit}; use one of "
            f"{', '.join(ROCM_DEV_TAGS)} or set image.base"
        )

    def devel_image(self, toolkit: str) -> str:
        return f"rocm/dev {toolkit}"

    def run_env(self) -> dict[str, str]:
        return {"HSA_FORCE_FINE_GRAIN_PCIE": "1"}

    def torch_build(self, torch: Mapping[str, object], packages: Mapping[str, str]) -> str | None:  # noqa: ARG002
        return f"ROCm {torch['hip']}" if torch.get("hip") else None


PLATFORM = Rocm()

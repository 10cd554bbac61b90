"""Intel Gaudi: Habana's pytorch-installer bases (their own torch), the HabanaAI
DeepSpeed fork at the SynapseAI tag, the habana container runtime.

The venv sees Habana's torch through ``--system-site-packages``; a PyPI torch
is never installed over it. DeepSpeed forwards no HABANA/HCCL variable to
the other nodes by itself, so .deepspeed_env carries the runtime's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.collectives import hccl
from builder.model import Extra, did_you_mean
from builder.platforms.base import ACCELERATOR_PROBE, VERSION_PATTERN, Platform, Problems

if TYPE_CHECKING:
    from collections.abc import Mapping

    from builder.spec.records import ImageSpec


@dataclass(frozen=True)
class GaudiRelease:
    """An Intel Gaudi SynapseAI release: the torch its base image ships, its OSes, and
    whether it still runs the first-gen Gaudi of AWS's DL1 instances."""

    torch: str
    oses: tuple[str, ...] = ("ubuntu22.04",)
    first_gen: bool = False


# Habana's pytorch-installer images (Support Matrix, Setup_and_Install common.mk).
# Each release has a HabanaAI/DeepSpeed tag of the same name. The Support Matrix lists
# first-gen Gaudi up to 1.21.0; from 1.22.0 on it lists Gaudi 2 and Gaudi 3 only.
GAUDI_RELEASES: dict[str, GaudiRelease] = {
    "1.18.0": GaudiRelease(torch="2.4.0", first_gen=True),
    "1.19.0": GaudiRelease(torch="2.5.1", first_gen=True),
    "1.20.0": GaudiRelease(torch="2.6.0", first_gen=True),
    "1.21.0": GaudiRelease(torch="2.6.0", first_gen=True),
    "1.22.0": GaudiRelease(torch="2.7.1", oses=("ubuntu22.04", "ubuntu24.04")),
    "1.23.0": GaudiRelease(torch="2.9.0", oses=("ubuntu22.04", "ubuntu24.04")),
}
HABANA_DEEPSPEED = "git+https://github.com/HabanaAI/DeepSpeed.git@{tag}"
DEFAULT_SYNAPSE = "1.23.0"
DEFAULT_OS = "ubuntu22.04"

# Set by Habana's images (ENV or /etc/profile.d) and needed by every rank;
# DeepSpeed forwards none of them to remote nodes by itself.
GAUDI_RUNTIME_ENV = (
    "DATA_LOADER_AEON_LIB_PATH",
    "GC_KERNEL_PATH",
    "HABANA_LOGS",
    "HABANA_PLUGINS_LIB_PATH",
    "HABANA_SCAL_BIN_PATH",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "MPI_ROOT",
    "OPAL_PREFIX",
    "RDMA_CORE_LIB",
    "RDMA_CORE_ROOT",
)

# Their values in Habana's pytorch-installer images (base Dockerfiles and
# /etc/profile.d); `builder dsenv --image` reads the image's own instead.
GAUDI_RUNTIME_DEFAULTS = {
    "DATA_LOADER_AEON_LIB_PATH": "/usr/lib/habanalabs/libaeon.so",
    "GC_KERNEL_PATH": "/usr/lib/habanalabs/libtpc_kernels.so",
    "HABANA_LOGS": "/var/log/habana_logs/",
    "HABANA_PLUGINS_LIB_PATH": "/opt/habanalabs/habana_plugins",
    "HABANA_SCAL_BIN_PATH": "/opt/habanalabs/engines_fw",
    "RDMA_CORE_LIB": "/opt/habanalabs/rdma-core/src/build/lib",
    "RDMA_CORE_ROOT": "/opt/habanalabs/rdma-core/src",
}


class Gaudi(Platform):
    """Intel Gaudi accelerators (HPUs)."""

    name = "gaudi"
    # Intel Gaudi docs (software 1.24.0), "Running Workloads on Kubernetes" and "Intel Gaudi
    # Device Plugin for Kubernetes" (docs.habana.ai/en/latest/Quick_Start_Guides/
    # Kubernetes_Quick_Start.html): limits habana.ai/gaudi, capabilities add SYS_NICE (as its
    # docker flags --cap-add sys_nice)
    kubernetes_resource = "habana.ai/gaudi"
    kubernetes_capabilities = ("SYS_NICE",)
    # Habana's Slurm fork (gpu/hlml) sets HABANA_VISIBLE_DEVICES; Habana's runtime selects
    # modules by HABANA_VISIBLE_MODULES, which a site's prolog may set
    device_variables = ("HABANA_VISIBLE_DEVICES", "HABANA_VISIBLE_MODULES")
    version_keys = (
        Extra("synapse", "Intel Gaudi SynapseAI release (gaudi only).", VERSION_PATTERN),
    )
    hashed_when_unset = ("synapse",)
    base_family = re.compile(r"habana|gaudi", re.IGNORECASE)
    default_os = DEFAULT_OS
    architectures = ("linux/amd64",)
    architectures_why = (
        "Intel's Gaudi software (SynapseAI, its PyTorch and its vault.habana.ai base images) "
        "is released for x86_64 hosts only (docs.habana.ai support matrix)"
    )
    system_site_packages = True
    # Habana's documented settings: its container runtime with every card visible,
    # OpenMPI's shared-memory transport without CMA, sys_nice for its scheduler.
    docker_flags = (
        "--runtime",
        "habana",
        "-e",
        "HABANA_VISIBLE_DEVICES=all",
        "-e",
        "OMPI_MCA_btl_vader_single_copy_mechanism=none",
        "--cap-add",
        "sys_nice",
        "--ipc",
        "host",
    )
    rehearsal_env = (("DS_ACCELERATOR", "cpu"),)
    deepspeed_ops = ()  # Habana's DeepSpeed fork brings its HPU kernels with SynapseAI
    default_deepspeed_ops = ()
    ds_accelerator = "hpu"
    collective = hccl.COLLECTIVE
    torch_device = "hpu"
    probe_sizes = ACCELERATOR_PROBE
    device_word = "HPU"
    env_prefixes = ("HABANA_", "PT_HPU_")
    # Habana's images ship their own OpenMPI ($MPI_ROOT, e.g. /opt/amazon/openmpi with
    # MPICC and PATH set in Habana's Dockerfiles; /opt/habanalabs/openmpi-4.1.5 in
    # 1.13): the distribution's next to it would shadow it on PATH, so none is added.
    openmpi_packages = ()

    def default_base(self, image: ImageSpec) -> str:
        synapse = image.versions.get("synapse", DEFAULT_SYNAPSE)
        release = GAUDI_RELEASES[synapse]
        return (
            f"vault.habana.ai/gaudi-docker/{synapse}/{image.os or DEFAULT_OS}"
            f"/habanalabs/pytorch-installer-{release.torch}:latest"
        )

    def os_of(self, image: ImageSpec) -> str | None:
        if image.versions.get("synapse", DEFAULT_SYNAPSE) not in GAUDI_RELEASES:
            return None  # reported as image.synapse; the OS of no release cannot be told
        return super().os_of(image)

    def installs_torch(self, image: ImageSpec) -> bool:  # noqa: ARG002
        return False  # Habana's torch is in the base image; never reinstall it

    def deepspeed_requirement(self, version: str) -> str:
        return HABANA_DEEPSPEED.format(tag=version)

    def build_packages(self, image: ImageSpec) -> tuple[str, ...]:  # noqa: ARG002
        return ("git",)  # pip clones the HabanaAI fork

    def problems(self, image: ImageSpec) -> Problems:
        synapse = image.versions.get("synapse", DEFAULT_SYNAPSE)
        release = GAUDI_RELEASES.get(synapse)
        if release is None:
            return [
                (
                    "image.synapse",
                    f"unknown SynapseAI release {synapse!r}; known: {', '.join(GAUDI_RELEASES)}"
                    + did_you_mean(synapse, GAUDI_RELEASES),
                )
            ]
        problems: Problems = []
        if image.base is None and (image.os or DEFAULT_OS) not in release.oses:
            problems.append(
                ("image.os", f"SynapseAI {synapse} images exist for {', '.join(release.oses)}")
            )
        if image.torch and image.torch != release.torch:
            problems.append(
                (
                    "image.torch",
                    f"SynapseAI {synapse} ships Habana's torch {release.torch}; "
                    "leave image.torch unset (a PyPI torch would replace Habana's build)",
                )
            )
        if image.torch_index:
            problems.append(("image.torch_index", "Gaudi uses the base image's torch; remove it"))
        # AWS's fabric, which among Gaudi machines only DL1 (first-gen Gaudi) has
        if image.fabric == hccl.EFA and not release.first_gen:
            problems.append(
                (
                    "image.fabric",
                    f"efa is AWS DL1's fabric, whose first-gen Gaudi SynapseAI {synapse} no "
                    "longer supports (Habana's Support Matrix lists it up to 1.21.0): use "
                    'synapse: "1.21.0" on DL1; on Gaudi 2 and Gaudi 3 use none (the Gaudi '
                    "NICs) or roce/infiniband (the host's NICs)",
                )
            )
        if image.deepspeed and image.deepspeed != synapse:
            problems.append(
                (
                    "image.deepspeed",
                    f"Gaudi needs the HabanaAI DeepSpeed fork at the SynapseAI tag: "
                    f'set deepspeed: "{synapse}"',
                )
            )
        return problems

    def slurm_options(self, slots: int, gpus_per_node: int | None) -> list[str]:
        # Habana's Slurm fork schedules the cards as the GRES gpu (GresTypes=gpu,
        # NodeName=... Gres=gpu:8): docs.habana.ai, Orchestration/SLURM/SLURM.html
        cards = slots if gpus_per_node is None else gpus_per_node
        return [f"--gres=gpu:{cards}"] if cards else []

    def forwarded_env(self, image_env: Mapping[str, str] | None) -> dict[str, str]:
        # graph compilation on the other nodes fails without these
        env: dict[str, str] = {}
        for name in GAUDI_RUNTIME_ENV:
            value = (image_env or {}).get(name) or GAUDI_RUNTIME_DEFAULTS.get(name)
            if value:
                env[name] = value
        return env

    def torch_build(self, torch: Mapping[str, object], packages: Mapping[str, str]) -> str | None:  # noqa: ARG002
        return "HPU" if "habana-torch-plugin" in packages else None


PLATFORM = Gaudi()

"""Accelerator knowledge as data: base images, OS Pythons, torch wheel indexes.

Nothing here renders text. ``resolve_image`` turns the user's (sparse)
``ImageSpec`` into a ``ResolvedImage`` with every default filled in, and
``check_spec`` lists the combinations that cannot work, each with the
field path to blame and what to do instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from builder.spec import Accelerator, ImageSpec, LaunchSpec, Spec


@dataclass(frozen=True)
class OSRelease:
    """A base OS we know: its python3 and whether pip may touch the system Python."""

    python: str
    pep668: bool


OSES: dict[str, OSRelease] = {
    "ubuntu22.04": OSRelease(python="3.10", pep668=False),
    "ubuntu24.04": OSRelease(python="3.12", pep668=True),
    "bookworm": OSRelease(python="3.11", pep668=True),
}

# torch minor -> CUDA wheel indexes on download.pytorch.org that carry it
# (PyTorch's previous-versions page and RELEASE.md compatibility matrix).
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
}
TORCH_INDEX_ROOT = "https://download.pytorch.org/whl"

# nvidia/cuda X.Y.Z-cudnn-devel-OS tags NVIDIA still publishes (its
# supported-tags list; older tags are deleted after the driver's end of life).
CUDA_DEVEL_TAGS: dict[str, tuple[str, ...]] = {
    "12.4.1": ("ubuntu22.04",),
    "12.6.3": ("ubuntu22.04", "ubuntu24.04"),
    "12.9.1": ("ubuntu22.04", "ubuntu24.04"),
    "13.0.3": ("ubuntu22.04", "ubuntu24.04"),
    "13.1.2": ("ubuntu22.04", "ubuntu24.04"),
    "13.2.1": ("ubuntu22.04", "ubuntu24.04"),
}


@dataclass(frozen=True)
class GaudiRelease:
    """An Intel Gaudi SynapseAI release: the torch its base image ships, its OSes."""

    torch: str
    oses: tuple[str, ...] = ("ubuntu22.04",)


# Habana's pytorch-installer images (Support Matrix, Setup_and_Install common.mk).
# Each release has a HabanaAI/DeepSpeed tag of the same name.
GAUDI_RELEASES: dict[str, GaudiRelease] = {
    "1.18.0": GaudiRelease(torch="2.4.0"),
    "1.19.0": GaudiRelease(torch="2.5.1"),
    "1.20.0": GaudiRelease(torch="2.6.0"),
    "1.21.0": GaudiRelease(torch="2.6.0"),
    "1.22.0": GaudiRelease(torch="2.7.1", oses=("ubuntu22.04", "ubuntu24.04")),
    "1.23.0": GaudiRelease(torch="2.9.0", oses=("ubuntu22.04", "ubuntu24.04")),
}
HABANA_DEEPSPEED = "git+https://github.com/HabanaAI/DeepSpeed.git@{tag}"

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

# `docker run` flags a training container needs, per accelerator (NVIDIA's
# and Habana's documented settings). Host networking for all: NCCL/HCCL/gloo
# and sshd talk node to node directly.
DOCKER_RUN_FLAGS: dict[Accelerator, tuple[str, ...]] = {
    Accelerator.cuda: (
        "--gpus", "all", "--ipc", "host",
        "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
    ),
    Accelerator.gaudi: (
        "--runtime", "habana", "-e", "HABANA_VISIBLE_DEVICES=all",
        "-e", "OMPI_MCA_btl_vader_single_copy_mechanism=none",
        "--cap-add", "sys_nice", "--ipc", "host",
    ),
    Accelerator.cpu: ("--ipc", "host"),
}  # fmt: skip
# gaudi_spawn.py has no port flag: DistributedRunner always passes its default.
GAUDI_SPAWN_PORT = 29500
# gaudi_spawn.py joins the script and its arguments with spaces, wraps those
# holding a space in double quotes, and hands the line to bash: only these
# characters come through unchanged.
GAUDI_SPAWN_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./ -]+")


def gaudi_spawn_unsafe(value: str) -> str | None:
    """Why gaudi_spawn.py would change value on its way to the script, or None."""
    if not GAUDI_SPAWN_SAFE.fullmatch(value):
        return (
            "gaudi_spawn.py passes it through bash without quoting: use only letters, "
            "digits, spaces and _@%+=:,./- (put anything else in a config file)"
        )
    return None


INFINIBAND_FLAGS = ("--device", "/dev/infiniband", "--cap-add", "IPC_LOCK")
AWS_EFA_FLAGS = ("--privileged",)
"""Gaudi on AWS DL1: EFA devices are visible only to a privileged container."""

DEFAULT_CUDA = "12.6.3"
DEFAULT_CUDA_OS = "ubuntu22.04"
DEFAULT_SYNAPSE = "1.23.0"
DEFAULT_GAUDI_OS = "ubuntu22.04"
CPU_BASE = "debian:bookworm-slim"
CPU_OS = "bookworm"
VENV = "/opt/venv"

# Pinned so that `--no-build-isolation` builds (DeepSpeed) find them in the
# venv: Python 3.12 venvs no longer ship setuptools.
BUILD_TOOLS = ("setuptools==80.9.0", "wheel==0.45.1")

_FAMILY_PATTERNS = {
    Accelerator.cuda: re.compile(r"(^|/)(nvidia/cuda|nvcr\.io/nvidia/)|cuda", re.IGNORECASE),
    Accelerator.gaudi: re.compile(r"habana|gaudi", re.IGNORECASE),
}


@dataclass(frozen=True)
class ResolvedImage:
    """An ImageSpec with every default decided; what the recipe is built from."""

    accelerator: Accelerator
    base: str
    os: str | None
    python: str | None
    torch: str | None
    torch_index: str | None
    deepspeed: str | None
    system_site_packages: bool
    env: dict[str, str] = field(default_factory=dict)


def torch_cuda_index(torch: str, cuda: str) -> str | None:
    """The CUDA wheel index for torch on a CUDA base: same major, newest minor <= the base's.

    The wheels bring their own CUDA runtime; the base's toolkit must match
    torch's CUDA major for extensions (DeepSpeed's ops) to compile.
    """
    major, minor = (int(part) for part in cuda.split(".")[:2])
    fitting = [
        tag
        for tag in TORCH_CUDA_INDEXES.get(_minor_of(torch), ())
        if int(tag[2:-1]) == major and int(tag[-1]) <= minor
    ]
    return max(fitting, key=lambda tag: int(tag[-1]), default=None)


def _minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def default_base(image: ImageSpec) -> str:
    """The base image a stack gets when it names none."""
    if image.accelerator is Accelerator.cuda:
        os_name = image.os or DEFAULT_CUDA_OS
        return f"nvidia/cuda:{image.cuda or DEFAULT_CUDA}-cudnn-devel-{os_name}"
    if image.accelerator is Accelerator.gaudi:
        synapse = image.synapse or DEFAULT_SYNAPSE
        release = GAUDI_RELEASES[synapse]
        return (
            f"vault.habana.ai/gaudi-docker/{synapse}/{image.os or DEFAULT_GAUDI_OS}"
            f"/habanalabs/pytorch-installer-{release.torch}:latest"
        )
    return CPU_BASE


def _os_of(image: ImageSpec) -> str | None:
    if image.os:
        return image.os
    if image.accelerator is Accelerator.gaudi and image.base is None:
        return DEFAULT_GAUDI_OS
    if image.base is None:
        return DEFAULT_CUDA_OS if image.accelerator is Accelerator.cuda else CPU_OS
    return next((name for name in OSES if name in image.base), None)


def resolve_image(image: ImageSpec) -> ResolvedImage:
    """Fill in defaults; assumes ``check_spec`` found no problems."""
    os_name = _os_of(image)
    python = image.python or (OSES[os_name].python if os_name in OSES else None)
    torch_index = image.torch_index
    torch = image.torch
    deepspeed = image.deepspeed
    if image.accelerator is Accelerator.cuda and torch and torch_index is None:
        torch_index = f"{TORCH_INDEX_ROOT}/{torch_cuda_index(torch, image.cuda or DEFAULT_CUDA)}"
    elif image.accelerator is Accelerator.cpu:
        torch_index = torch_index or f"{TORCH_INDEX_ROOT}/cpu"
    else:
        torch = None  # Habana's torch is in the base image; never reinstall it.
    return ResolvedImage(
        accelerator=image.accelerator,
        base=image.base or default_base(image),
        os=os_name,
        python=python,
        torch=torch,
        torch_index=torch_index if torch else None,
        deepspeed=deepspeed,
        system_site_packages=image.accelerator is Accelerator.gaudi,
        env=dict(image.env),
    )


def check_spec(spec: Spec) -> list[tuple[str, str]]:
    """Combinations that cannot work, as (field path, what to do) pairs."""
    problems = _check_accelerator(spec.image)
    problems += _check_common(spec)
    return problems


def _check_accelerator(image: ImageSpec) -> list[tuple[str, str]]:
    acc = image.accelerator
    problems: list[tuple[str, str]] = []
    if acc is not Accelerator.cuda and image.cuda:
        problems.append(("image.cuda", f"cuda is only for accelerator: cuda (this is {acc.value})"))
    if acc is not Accelerator.gaudi and image.synapse:
        problems.append(
            ("image.synapse", f"synapse is only for accelerator: gaudi (this is {acc.value})")
        )
    if image.base:
        for other, pattern in _FAMILY_PATTERNS.items():
            if other is not acc and pattern.search(image.base):
                problems.append(
                    (
                        "image.base",
                        f"{image.base!r} is a {other.value} image but accelerator is "
                        f"{acc.value}; use a {acc.value} base or leave base unset",
                    )
                )
    if image.os and image.os not in OSES:
        problems.append(("image.os", f"{image.os!r} is not one of {', '.join(OSES)}"))
    if acc is Accelerator.cuda:
        problems += _check_cuda(image)
    elif acc is Accelerator.gaudi:
        problems += _check_gaudi(image)
    elif image.torch is None:
        problems.append(("image.torch", 'set the torch version, e.g. torch: "2.14.1"'))
    return problems


def _check_cuda(image: ImageSpec) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    cuda = image.cuda or DEFAULT_CUDA
    if image.base is None:
        oses = CUDA_DEVEL_TAGS.get(cuda)
        if oses is None:
            problems.append(
                (
                    "image.cuda",
                    f"nvidia/cuda has no {cuda}-cudnn-devel image (any more); use one of "
                    f"{', '.join(CUDA_DEVEL_TAGS)} or set image.base",
                )
            )
        elif (image.os or DEFAULT_CUDA_OS) not in oses:
            problems.append(
                ("image.os", f"nvidia/cuda {cuda}-cudnn-devel exists for {', '.join(oses)}")
            )
    if image.torch is None:
        problems.append(("image.torch", 'set the torch version, e.g. torch: "2.14.1"'))
        return problems
    if image.torch_index is not None:
        return problems  # a user-chosen index: we cannot know what it carries
    indexes = TORCH_CUDA_INDEXES.get(_minor_of(image.torch))
    if indexes is None:
        problems.append(
            (
                "image.torch",
                f"torch {image.torch} is not in builder's CUDA wheel table "
                f"({', '.join(TORCH_CUDA_INDEXES)}); pick one of those or set "
                "image.torch_index to the index that has it",
            )
        )
    elif torch_cuda_index(image.torch, cuda) is None:
        problems.append(
            (
                "image.torch",
                f"torch {image.torch} has no wheels for CUDA {cuda} (it is built for "
                f"{', '.join(indexes)}): change image.cuda or image.torch",
            )
        )
    return problems


def _check_gaudi(image: ImageSpec) -> list[tuple[str, str]]:
    synapse = image.synapse or DEFAULT_SYNAPSE
    release = GAUDI_RELEASES.get(synapse)
    if release is None:
        return [
            (
                "image.synapse",
                f"unknown SynapseAI release {synapse!r}; known: {', '.join(GAUDI_RELEASES)}",
            )
        ]
    problems: list[tuple[str, str]] = []
    if image.base is None and (image.os or DEFAULT_GAUDI_OS) not in release.oses:
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
    if image.deepspeed and image.deepspeed != synapse:
        problems.append(
            (
                "image.deepspeed",
                f"Gaudi needs the HabanaAI DeepSpeed fork at the SynapseAI tag: "
                f'set deepspeed: "{synapse}"',
            )
        )
    return problems


def _check_common(spec: Spec) -> list[tuple[str, str]]:
    image, launch = spec.image, spec.launch
    problems: list[tuple[str, str]] = []
    os_name = _os_of(image) if not _unknown_synapse(image) else None
    if image.python and os_name in OSES and OSES[os_name].python != image.python:
        problems.append(
            (
                "image.python",
                f"{os_name} ships Python {OSES[os_name].python}, not {image.python}; "
                f"set python to {OSES[os_name].python!r} or choose another base/os",
            )
        )
    if image.pdsh and not image.ssh.enabled:
        problems.append(
            ("image.pdsh", "pdsh reaches nodes over ssh: enable image.ssh or drop pdsh")
        )
    problems += launcher_problems(image, launch)
    return problems


def launcher_problems(image: ImageSpec, launch: LaunchSpec) -> list[tuple[str, str]]:
    """What the launcher needs from the image (also checked for --launcher overrides)."""
    problems: list[tuple[str, str]] = []
    name = launch.launcher
    if name in ("deepspeed", "gaudi_spawn") and not image.deepspeed:
        problems.append(("launch.launcher", f"{name} needs DeepSpeed: set image.deepspeed"))
    if name in ("deepspeed", "gaudi_spawn") and not image.pdsh:
        problems.append(
            ("launch.launcher", f"{name} reaches the other nodes with pdsh: set image.pdsh: true")
        )
    # (pdsh without ssh is reported on its own, as image.pdsh)
    if name in ("deepspeed", "gaudi_spawn", "mpirun") and not image.ssh.enabled and not image.pdsh:
        problems.append(("launch.launcher", f"{name} reaches the nodes over ssh: enable image.ssh"))
    if name == "mpirun" and not image.openmpi:
        problems.append(
            ("launch.launcher", "mpirun needs OpenMPI in the image: set image.openmpi: true")
        )
    if name == "gaudi_spawn":
        problems += _gaudi_spawn_problems(image, launch)
    return problems


def _gaudi_spawn_problems(image: ImageSpec, launch: LaunchSpec) -> list[tuple[str, str]]:
    """What gaudi_spawn.py cannot do: another port or master, or values bash would change."""
    problems = []
    if image.accelerator is not Accelerator.gaudi:
        problems.append(("launch.launcher", "gaudi_spawn is for accelerator: gaudi"))
    if launch.master_port != GAUDI_SPAWN_PORT:
        problems.append(
            (
                "launch.master_port",
                f"gaudi_spawn.py always uses port {GAUDI_SPAWN_PORT} (it has no port flag); "
                f"drop master_port or use launcher: deepspeed",
            )
        )
    if launch.master_addr is not None:
        problems.append(
            (
                "launch.master_addr",
                "gaudi_spawn.py makes the first host of the hostfile the master; drop "
                "master_addr and put that node first, or use launcher: deepspeed",
            )
        )
    values = [("launch.script", launch.script), ("launch.gaudi_spawn", launch.gaudi_spawn)]
    values += [(f"launch.args[{i}]", arg) for i, arg in enumerate(launch.args)]
    for where, value in values:
        why = gaudi_spawn_unsafe(value)
        if why:
            problems.append((where, f"{value!r}: {why}"))
    return problems


def _unknown_synapse(image: ImageSpec) -> bool:
    return image.accelerator is Accelerator.gaudi and (
        (image.synapse or DEFAULT_SYNAPSE) not in GAUDI_RELEASES
    )

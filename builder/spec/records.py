"""The stack spec: closed, frozen, typed models for stack.yaml.

Two sections with a hard wall between them: ``image`` is everything baked
into the image (and so into its hash), ``launch`` is everything about how
the image is started on nodes. Changing the node list must never change the
image, so nothing under ``launch`` may be read by the renderers.

The accelerators and launchers are plug-ins (``builder.platforms``,
``builder.launch.launchers``): their names are the choices of
``image.accelerator`` and ``launch.launcher``, and the keys they own
(``image.cuda``, ``launch.gaudi_spawn``) are collected into ``image.versions``
and ``launch.settings``. Cross-field rules live with them and in
``spec.check``, which reports several problems at once, each with its path.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from builder import architectures, platforms, schedulers
from builder.cluster.nodelist import MAX_HOSTS, expand_nodelist
from builder.errors import UsageError, shown
from builder.fabrics import NAMES as FABRICS
from builder.image.reference import TAG_PATTERN, name_problem
from builder.image.reference import problem as reference_problem
from builder.launch import launchers, runtimes
from builder.launch.actions import bind_problem, normal_path
from builder.launch.launchers.deepspeed import PDSH_PATH_CHARS
from builder.launch.secrets import is_secret_name
from builder.launch.squashfs import squashfs_problem
from builder.model import did_you_mean, field, json_schema, sorted_unique
from builder.platforms.base import FROM_BASE, VERSION_PATTERN

T = TypeVar("T")
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
IMAGE_REF = r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$"
"""A Docker image reference (name[:tag][@digest]) as one word: no blank, quote or '-' first."""
_VERSION = VERSION_PATTERN
_PACKAGE = r"^[A-Za-z0-9][A-Za-z0-9._+:=<>!~,\[\]@/ -]*$"
_USER = r"^[a-z_][a-z0-9_-]{0,31}$"


def env_value_problem(name: str, value: str) -> str | None:
    """What is wrong with one launch.env entry (from the spec, or a command's --set)."""
    if not re.fullmatch(ENV_NAME, name):
        return f"{name!r} is not a variable name (letters, digits and '_', not a digit first)"
    if name == "PATH":
        return (
            "PATH is managed by builder (the venv goes in front of the base image's PATH); "
            "add directories with another variable or install into the venv"
        )
    if "\n" in value or "\r" in value or "\0" in value:
        return f"the value of {name} contains a newline or NUL; put it on one line"
    return None


def _env_values(env: dict[str, str]) -> dict[str, str]:
    for key, value in env.items():
        problem = env_value_problem(key, value)
        if problem:
            raise ValueError(problem)
    return env


def _node_lists(nodes: tuple[str, ...]) -> tuple[str, ...]:
    # Checked here, with the field's line, rather than when a hostfile is written.
    names: list[str] = []
    for entry in nodes:
        try:
            names += expand_nodelist(entry)
        except UsageError as exc:
            raise ValueError(str(exc)) from None
        if len(names) > MAX_HOSTS:
            raise ValueError(f"the node lists name more than {MAX_HOSTS} hosts")
    twice = sorted(name for name, count in Counter(names).items() if count > 1)
    if twice:
        raise ValueError(
            f"{', '.join(twice[:5])} listed more than once; DeepSpeed refuses a hostfile "
            "with duplicate hosts (give each node once)"
        )
    return nodes


_HOST_LABEL = r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
HOST_NAME = rf"(?=.{{1,253}}$){_HOST_LABEL}(\.{_HOST_LABEL})*"
"""A host name as every launcher passes it on: dot-separated labels of letters, digits,
'-' and '_', neither '-' first (another option to the launcher) nor a ':' (a port)."""


def _master_addr(value: str) -> str:
    """launch.master_addr: a host name or an IP address, as every launcher reads it
    (torchrun's --rdzv-endpoint adds :PORT itself, and an IPv6 address in brackets)."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        pass
    else:
        return value
    if re.fullmatch(HOST_NAME, value):
        return value
    host, _, port = value.rpartition(":")
    if port.isdigit() and re.fullmatch(HOST_NAME, host.strip("[]")):
        raise ValueError(
            f"{value!r} carries a port: write the host alone ({host.strip('[]')}) and the port "
            f"in launch.master_port ({port})"
        )
    raise ValueError(
        f"{value!r} is not a host name or an IP address (labels of letters, digits, '-' and "
        "'_' joined by '.', not starting with '-'): it is the rendezvous every rank connects to"
    )


def _node_slots(slots: dict[str, int]) -> dict[str, int]:
    for name, count in slots.items():
        if not 1 <= count <= 1024:
            raise ValueError(f"{name}: {count} processes; give 1 to 1024")
    return dict(sorted(slots.items()))


def _bind_path(path: str) -> str:
    # One side of a bind (``bind_problem``: what docker and apptainer would misread),
    # normalised before anything else reads it.
    why = bind_problem(path)
    if why:
        raise ValueError(f"{shown(path)}: {why}")
    return normal_path(path)


NODE_LOCAL = ("/tmp", "/var/tmp", "/dev", "/run", "/proc", "/sys")
"""Folders every node has of its own: a run's logs or checkpoints there are seen by one
node only, and gone with a restarted container (a memory-backed /tmp, /dev/shm)."""


def _shared_path(path: str) -> str:
    # A folder every node must see: a bind path, and not under a node's own folders.
    path = _bind_path(path)
    local = next((top for top in NODE_LOCAL if path == top or path.startswith(f"{top}/")), None)
    if local:
        raise ValueError(
            f"{shown(path)} is under {local}, which every node has of its own: a rank on "
            "another node (or a restarted one) would not see what was written there; give "
            "a folder on shared storage (NFS, Lustre, GPFS, ...), the same path on every node"
        )
    return path


def _squashfs_path(path: str) -> str:
    # The enroot squashfs on shared storage: one file every node reads (runtime pyxis).
    why = squashfs_problem(path)
    if why:
        raise ValueError(f"{shown(path)}: {why}")
    return normal_path(path)


def _image_env(env: dict[str, str]) -> dict[str, str]:
    # The image is in every layer, the registry and the SIF: a secret there is public.
    secret = sorted(name for name in env if is_secret_name(name))
    if secret:
        raise ValueError(
            f"{', '.join(secret)} is named like a secret, and image.env is baked into "
            "every layer of the image, the registry's copy and the SIF: set it in "
            "launch.env instead, which carries secrets only in the bundle's 0600 files"
        )
    return _env_values(env)


def _sif_path(path: str) -> str:
    # The SIF on shared storage: one file every node reads (Apptainer's runtimes only).
    path = _bind_path(path)
    if not path.endswith(".sif") or path.endswith("/.sif"):
        raise ValueError(f"{path!r}: name the SIF file itself (a path ending in NAME.sif)")
    return path


SYSTEM_ACCOUNTS = frozenset(
    [
        "daemon",
        "bin",
        "sys",
        "sync",
        "games",
        "man",
        "lp",
        "mail",
        "news",
        "uucp",
        "proxy",
        "www-data",
        "backup",
        "list",
        "irc",
        "gnats",
        "_apt",
        "nobody",
        "messagebus",
        "systemd-network",
        "systemd-resolve",
        "systemd-timesync",
        "sshd",
        "ubuntu",
        "nogroup",
    ]
)
"""Accounts the Debian and Ubuntu base images already have (`useradd` would fail)."""


def _image_name(name: str) -> str:
    problem = name_problem(name)
    if problem is not None:
        raise ValueError(problem)
    return name


def _image_reference(reference: str) -> str:
    problem = reference_problem(reference)
    if problem is not None:
        raise ValueError(problem)
    return reference


def _account_name(name: str) -> str:
    if name in SYSTEM_ACCOUNTS:
        raise ValueError(
            f"{name!r} is an account of the base image already (useradd fails on it): "
            "choose another name, or root"
        )
    return name


def _platforms(items: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [item for item in items if item not in architectures.KNOWN]
    if unknown:
        meant = architectures.named(unknown[0])
        hint = (
            f"; did you mean {meant.platform!r}?"
            if meant is not None
            else did_you_mean(unknown[0], architectures.PLATFORMS)
        )
        raise ValueError(
            f"{shown(unknown[0])} is not a platform builder builds for: "
            f"{', '.join(architectures.PLATFORMS)} (docker's names; aarch64 is "
            f"linux/arm64){hint}"
        )
    if not items:
        raise ValueError(
            "[] builds nothing: leave it out for this machine's architecture, or list "
            f"some of {', '.join(architectures.PLATFORMS)}"
        )
    return sorted_unique(items)


@dataclass(frozen=True)
class SSH:
    """sshd inside the image, so pdsh/DeepSpeed can reach every node."""

    enabled: bool = field(True, description="Install and configure sshd and the ssh client.")
    port: int = field(
        3022,
        ge=1,
        le=65535,
        description=(
            "Port sshd listens on AND the ssh client's default port, so pdsh and "
            "DeepSpeed need no --ssh_port. Not 22: with host networking the host's "
            "own sshd owns 22."
        ),
    )


@dataclass(frozen=True)
class User:
    """The account training runs as; sshd itself always starts as root."""

    name: str = field(
        "root",
        pattern=_USER,
        check=_account_name,
        description="Login name (root, or a name the base image does not have).",
    )
    uid: int = field(
        1000,
        ge=1000,
        le=2**31 - 2,
        description="UID when name is not root (1000 and up: the base image's accounts "
        "hold the ones below).",
    )


@dataclass(frozen=True)
class ImageSpec:
    """Everything baked into the image. Any change here changes the image hash."""

    accelerator: str = field(
        choices=platforms.names,
        example="cuda",
        description="What the image computes on (a platform: cpu, cuda, gaudi, rocm, ...).",
    )
    name: str = field(
        "builder/stack",
        check=_image_name,
        description="Image repository name, e.g. team/train (docker's grammar: no tag here).",
    )
    tag: str = field("latest", pattern=TAG_PATTERN, description="Image tag.")
    base: str | None = field(
        None,
        check=_image_reference,
        example="'nvcr.io/nvidia/pytorch:24.05-py3'",
        description="Base image; default derived from accelerator, cuda/synapse and os.",
    )
    os: str | None = field(
        None,
        example="ubuntu22.04",
        description="OS of the base image: ubuntu22.04, ubuntu24.04 or bookworm.",
    )
    versions: dict[str, str] = field(
        default_factory=dict,
        extras=platforms.version_keys,
        description="The platform's own release keys (cuda, synapse, rocm), as written.",
    )
    platforms: tuple[str, ...] | None = field(
        None,
        check=_platforms,
        example="[linux/amd64, linux/arm64]",
        description=(
            "CPU architectures to build, as docker names them: linux/amd64, linux/arm64 "
            "(aarch64: Grace in GH200 and GB200 nodes). Each is built through the engine "
            "(another than the build machine's under qemu); several are pushed as one tag "
            "(a manifest list), so that each node pulls its own. Unset: the build machine's."
        ),
    )
    python: str | None = field(
        None,
        pattern=_VERSION,
        example="'3.12'",
        description="Python version; must be the base OS's python3.",
    )
    torch: str | None = field(
        None,
        pattern=rf"^{FROM_BASE}$|{_VERSION}",
        example="'2.4.1'",
        description=(
            "torch version from PyTorch's wheel index, or from-base: keep the torch (and "
            "NCCL, MPI) of a framework base image such as nvcr.io/nvidia/pytorch, never "
            "installing another over it (gaudi: fixed by the SynapseAI release; leave unset)."
        ),
    )
    torch_index: str | None = field(
        None,
        pattern=r"^(https?|file)://\S+$",
        example="'https://download.pytorch.org/whl/cu124'",
        description="pip index for torch; default derived from accelerator and CUDA version.",
    )
    deepspeed: str | None = field(
        None,
        pattern=_VERSION,
        example="'0.15.4'",
        description=(
            "DeepSpeed version from PyPI (cuda, cpu) or the HabanaAI/DeepSpeed tag "
            "(gaudi: must equal the SynapseAI release). Unset: no DeepSpeed."
        ),
    )
    deepspeed_ops: tuple[str, ...] | None = field(
        None,
        items_pattern=r"^[a-z][a-z0-9_]{0,63}$",
        check=sorted_unique,
        example="[cpu_adam, fused_adam]",
        description=(
            "DeepSpeed ops compiled into the image (DS_BUILD_<OP>=1), so that no run compiles "
            "them just in time. Unset: the platform's default (cpu: cpu_adam and "
            "deepspeed_shm_comm; cuda and rocm: cpu_adam and fused_adam); []: none."
        ),
    )
    archs: tuple[str, ...] | None = field(
        None,
        items_pattern=r"^[A-Za-z0-9][A-Za-z0-9.+_:-]{0,47}$",
        example="['8.0', '9.0']",
        description=(
            "GPU architectures the prebuilt ops are compiled for: CUDA compute capabilities "
            "(8.0, 9.0, 10.0; X.Y+PTX adds PTX for later GPUs), ROCm gfx targets (gfx90a, "
            "gfx942). Unset: the platform's default (cuda: 8.0 and 9.0, and 10.0 from CUDA "
            "12.8; rocm: gfx90a and gfx942)."
        ),
    )
    apt: tuple[str, ...] = field(
        (),
        items_pattern=_PACKAGE,
        check=sorted_unique,
        example="[htop, numactl]",
        description="Extra apt packages.",
    )
    pip: tuple[str, ...] = field(
        (),
        items_pattern=_PACKAGE,
        check=sorted_unique,
        example="['transformers==4.44.2']",
        description="Extra pip requirements (pin them: name==version).",
    )
    requirements: str | None = field(
        None,
        min_length=1,
        example="requirements.txt",
        description="requirements.txt path, relative to the spec file; installed last.",
    )
    env: dict[str, str] = field(
        default_factory=dict,
        keys_pattern=ENV_NAME,
        check=_image_env,
        example="{OMP_NUM_THREADS: '8'}",
        description=(
            "Environment baked into the image. Never a secret (a name with TOKEN, SECRET, "
            "PASSWORD, PASSWD or CREDENTIAL, or ending in KEY): set those in launch.env."
        ),
    )
    ssh: SSH = field(default_factory=SSH)
    fabric: str = field(
        "none",
        choices=lambda: FABRICS,
        description=(
            "The network between the nodes: none (TCP sockets; gaudi: the Gaudi NICs' own "
            "RoCE ports), infiniband or roce (the RDMA userspace in the image unless a "
            "framework base has it, the devices and locked memory at launch; cuda and "
            "rocm: NCCL_NET=IB so that NCCL fails rather than fall back to sockets; gaudi: "
            "HCCL over the host's NICs through libfabric's verbs), or efa (AWS: cuda on "
            "P4/P5, gaudi on DL1 with synapse <= 1.21.0)."
        ),
    )
    pdsh: bool = field(True, description="Install pdsh (DeepSpeed's default multi-node launcher).")
    openmpi: bool = field(
        False,
        description=(
            "Install OpenMPI (for mpirun launches); on a framework base, the base's own MPI "
            "if it has one."
        ),
    )
    user: User = field(default_factory=User)
    workdir: str = field(
        "/workspace",
        pattern=rf"/[{PDSH_PATH_CHARS}]*",
        description=(
            "Working directory (launch.code is mounted here). Letters, digits and ._+@/- "
            "only: DeepSpeed's pdsh runner pastes it unquoted into every node's shell line."
        ),
    )
    labels: dict[str, str] = field(
        default_factory=dict,
        keys_pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$",
        example="{org.opencontainers.image.authors: team}",
        description="Extra image labels.",
    )


@dataclass(frozen=True)
class Mount:
    """A host path bind-mounted into every node's container."""

    source: str = field(
        check=_bind_path,
        example="/shared/data",
        description="Host path, absolute, the same on every node.",
    )
    target: str = field(
        check=_bind_path, example="/data", description="Path inside the container, absolute."
    )
    read_only: bool = field(False, description="Mount read-only.")


@dataclass(frozen=True)
class LaunchSpec:
    """How the image is started on nodes. Never read by the image renderers."""

    launcher: str = field("deepspeed", choices=launchers.names, description="Launcher command.")
    runtime: str = field(
        "docker", choices=runtimes.names, description="Container runtime on the nodes."
    )
    nodes: tuple[str, ...] = field(
        ("node1", "node2"),
        min_length=1,
        items_pattern=r"^\S+$",
        check=_node_lists,
        example="[gpu01, gpu02]",
        what="a list of host names or Slurm node lists (gpu[01-04])",
        description="Host names or Slurm node lists (gpu[01-04]); order = node rank.",
    )
    slots: int = field(1, ge=1, le=1024, description="Processes (accelerators) per node.")
    node_slots: dict[str, int] = field(
        default_factory=dict,
        keys_pattern=r"^\S+$",
        check=_node_slots,
        example="{gpu02: 2}",
        description=(
            "Nodes of another size: a host of launch.nodes and its own processes (the others "
            "run launch.slots). The hostfile gets each host's slots=, each node's torchrun its "
            "own --nproc-per-node, and the world size is the sum. deepspeed and torchrun "
            "over ssh; Slurm and Kubernetes refuse it (their jobs give every node the same "
            "tasks)."
        ),
    )
    master_addr: str | None = field(
        None,
        check=_master_addr,
        example="gpu01",
        description="The rendezvous host every rank connects to: a host name, an IPv4 or "
        "an IPv6 address, without the port (launch.master_port). Default: the first node.",
    )
    master_port: int = field(29500, ge=1, le=65535, description="Rendezvous port.")
    restarts: int = field(
        0,
        ge=0,
        le=100,
        description=(
            "How many times the launcher restarts every rank after one fails (torchrun "
            "--max-restarts); the script resumes from its own checkpoint, which must be on "
            "storage every node sees (launch.checkpoints). torchrun only: "
            "DeepSpeed's, gaudi_spawn's and mpirun's launchers have none."
        ),
    )
    min_nodes: int | None = field(
        None,
        ge=1,
        le=MAX_HOSTS,
        example="2",
        description=(
            "Elastic: the run starts, and goes on after losing nodes, with at least this many "
            "of launch.nodes (torchrun --nnodes MIN:MAX). torchrun only."
        ),
    )
    rendezvous_timeout: int | None = field(
        None,
        ge=10,
        le=86400,
        example="900",
        description=(
            "Seconds each node waits for the others to join the rendezvous, at the start and "
            "after a restart (torchrun --rdzv-conf join_timeout; torch's default 600). "
            "torchrun only."
        ),
    )
    node_timeout: int | None = field(
        None,
        ge=3,
        le=3600,
        example="6",
        description=(
            "Elastic (launch.min_nodes): seconds without a heartbeat after which the "
            "rendezvous gives a node up (torchrun --rdzv-conf keep_alive_interval = a third "
            "of it, keep_alive_max_attempt = 3). Default 6 (torch's own: 15). Shorter finds "
            "a lost node sooner; a node that stalls longer (a long GC pause, a hung "
            "filesystem) is taken for lost. torchrun only."
        ),
    )
    last_call: int | None = field(
        None,
        ge=1,
        le=3600,
        example="3",
        description=(
            "Elastic (launch.min_nodes): seconds the rendezvous waits for more nodes once "
            "launch.min_nodes have joined, at the start and after a node is lost (torchrun "
            "--rdzv-conf last_call_timeout). Default 3 (torch's own: 30). A node starting "
            "later than that joins at the next regroup, which restarts every rank. torchrun "
            "only."
        ),
    )
    socket_ifname: str | None = field(
        None,
        pattern=r"^(?!\.\.?$)[A-Za-z0-9_.-]{1,15}$",
        example="eth0",
        description=(
            "The nodes' network interface for the collectives' sockets (bootstrap, and "
            "data without RDMA), e.g. eth0 or ib0: sets NCCL_SOCKET_IFNAME, "
            "GLOO_SOCKET_IFNAME and on Gaudi HCCL_SOCKET_IFNAME (launch.env overrides, and "
            "takes NCCL's lists, ^ and = forms). Unset, each library picks one itself "
            "(virbr0, a bridge, ...)."
        ),
    )
    mnnvl: bool = field(
        False,
        description=(
            "Multi-node NVLink (GB200 NVL72 and other NVLink-switched racks; cuda only): "
            "every container gets IMEX channel 0 (docker: NVIDIA_IMEX_CHANNELS=0 for the "
            "NVIDIA Container Toolkit >= 1.15; apptainer: /dev/nvidia-caps-imex-channels "
            "bound; pyxis: enroot >= 4.0's hook binds it), and NCCL must use it: "
            "NCCL_MNNVL_ENABLE=1 (an error, not a silent fallback, where it cannot) and "
            "NCCL_CUMEM_ENABLE=1, which MNNVL needs. The nodes' nvidia-imex service and "
            "channel are the site's."
        ),
    )
    code: str | None = field(
        None,
        check=_bind_path,
        example="/shared/code",
        description=(
            "Host folder with the training code, on shared storage at the same path on every "
            "node: mounted at image.workdir (runtime none: the launcher starts in it); "
            "launch.script is relative to it."
        ),
    )
    cache: str | None = field(
        None,
        check=_bind_path,
        example="/shared/cache",
        description=(
            "Host folder for caches on shared storage, at the same path on every node: "
            "mounted at that path, with HF_HOME, TORCH_HOME and TRITON_CACHE_DIR set to "
            "subfolders of it."
        ),
    )
    checkpoints: str | None = field(
        None,
        check=_shared_path,
        example="/shared/checkpoints",
        description=(
            "Host folder for the script's checkpoints, on shared storage at the same path on "
            "every node: mounted at that path, named to every rank in BUILDER_CHECKPOINTS. "
            "A restarted or requeued run resumes from what is there."
        ),
    )
    logs: str | None = field(
        None,
        check=_shared_path,
        example="/shared/logs",
        description=(
            "Host folder for the run's logs, on shared storage at the same path on every "
            "node, mounted at that path: each rank's output and each node's error file "
            "(torchrun --log-dir and TORCHELASTIC_ERROR_FILE; deepspeed "
            "--enable_each_rank_log), and a Slurm job's node logs (default there: the "
            "cluster folder's logs/)."
        ),
    )
    sif: str | None = field(
        None,
        check=_sif_path,
        example="/shared/images/train.sif",
        description=(
            "Runtime apptainer/singularity: the SIF on shared storage, at the same path on "
            "every node, built once (`builder sif IMAGE -o PATH`). Unset, each node runs "
            "NAME-TAG.sif from the folder it starts in."
        ),
    )
    squashfs: str | None = field(
        None,
        check=_squashfs_path,
        example="/shared/images/train.sqsh",
        description=(
            "Runtime pyxis: the image as an enroot squashfs file on shared storage, at the "
            "same path on every node, made once (`builder squashfs IMAGE -o PATH`). Unset, "
            "every node imports the image from its registry (pinned by stack.digest)."
        ),
    )
    mounts: tuple[Mount, ...] = field(
        (), example="[{source: /shared/data, target: /data}]", description="Bind mounts."
    )
    env: dict[str, str] = field(
        default_factory=dict,
        keys_pattern=ENV_NAME,
        check=_env_values,
        example="{NCCL_DEBUG: INFO}",
        description="Run-time environment (NCCL_*, HCCL_*, ...); also goes to .deepspeed_env.",
    )
    secret: tuple[str, ...] = field(
        (),
        items_pattern=ENV_NAME,
        check=sorted_unique,
        example="[HF_TOKEN]",
        description=(
            "Names in launch.env whose values are secret: they travel only in the bundle's "
            "0600 secrets.env and secrets.sh, never on a printed command line or in a "
            "readable file. Names "
            "containing TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL, or ending in KEY, are "
            "secret without being listed."
        ),
    )
    script: str = field("train.py", min_length=1, description="Training script to launch.")
    args: tuple[str, ...] = field(
        (), example="['--epochs', '3']", description="Arguments passed to the script."
    )
    settings: dict[str, str] = field(
        default_factory=dict,
        extras=launchers.setting_keys,
        description="The launchers' own keys (gaudi_spawn), as written.",
    )
    sections: dict[str, Any] = field(
        default_factory=dict,
        sections=schedulers.sections,
        description="The schedulers' own sections (launch.slurm, launch.kubernetes), as written.",
    )

    def section(self, record: type[T]) -> T:
        """A scheduler's own section (launch.slurm as its record), its defaults if unset."""
        found = [value for value in self.sections.values() if isinstance(value, record)]
        return found[0] if found else record()

    def with_section(self, value: object) -> LaunchSpec:
        """This launch with a scheduler's section replaced by value (a section record)."""
        (name,) = [n for n, record in schedulers.sections().items() if isinstance(value, record)]
        return replace(self, sections={**self.sections, name: value})

    def slots_of(self, host: str) -> int:
        """The processes host runs: its own (node_slots), else launch.slots."""
        return self.node_slots.get(host, self.slots)

    @property
    def uneven(self) -> bool:
        """Some node runs another number of processes than launch.slots."""
        return any(count != self.slots for count in self.node_slots.values())

    def own_path_folders(self) -> tuple[tuple[str, str], ...]:
        """(field, host folder) of each folder bound at its own path in every runtime:
        launch.cache, launch.checkpoints, launch.logs (those set)."""
        folders = (
            ("launch.cache", self.cache),
            ("launch.checkpoints", self.checkpoints),
            ("launch.logs", self.logs),
        )
        return tuple((where, path) for where, path in folders if path)


@dataclass(frozen=True)
class Spec:
    """A whole stack: what to bake and how to launch it."""

    name: str = field(pattern=r"^[a-z0-9][a-z0-9._-]*$", example="train", description="Stack name.")
    image: ImageSpec = field(description="What is baked into the image.")
    version: Literal[1] = field(1, description="Spec format version.")
    description: str = field("", description="One line shown by `builder presets`.")
    launch: LaunchSpec = field(default_factory=LaunchSpec)


def spec_json_schema() -> dict[str, Any]:
    """JSON Schema of stack.yaml, for editors (yaml-language-server)."""
    return json_schema(Spec, "builder stack spec")


__all__ = [
    "SSH",
    "ImageSpec",
    "LaunchSpec",
    "Mount",
    "Spec",
    "User",
]

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

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from builder import architectures, platforms
from builder.cluster.nodelist import MAX_HOSTS, expand_nodelist
from builder.errors import UsageError, shown
from builder.fabrics import NAMES as FABRICS
from builder.image.reference import TAG_PATTERN, name_problem
from builder.image.reference import problem as reference_problem
from builder.launch import launchers, runtimes
from builder.launch.actions import bind_problem
from builder.launch.launchers.deepspeed import PDSH_PATH_CHARS
from builder.launch.secrets import is_secret_name
from builder.launch.squashfs import squashfs_problem
from builder.model import Check, did_you_mean, field, json_schema
from builder.platforms.base import FROM_BASE, VERSION_PATTERN

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


def _node_slots(slots: dict[str, int]) -> dict[str, int]:
    for name, count in slots.items():
        if not 1 <= count <= 1024:
            raise ValueError(f"{name}: {count} processes; give 1 to 1024")
    return dict(sorted(slots.items()))


def _bind_path(path: str) -> str:
    # One side of a bind (``bind_problem``: what docker and apptainer would misread).
    why = bind_problem(path)
    if why:
        raise ValueError(f"{shown(path)}: {why}")
    return path


NODE_LOCAL = ("/tmp", "/var/tmp", "/dev", "/run", "/proc", "/sys")
"""Folders every node has of its own: a run's logs or checkpoints there are seen by one
node only, and gone with a restarted container (a memory-backed /tmp, /dev/shm)."""


def _shared_path(path: str) -> str:
    # A folder every node must see: a bind path, and not under a node's own folders.
    _bind_path(path)
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
    return path


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
    _bind_path(path)
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


def _sorted_unique(items: tuple[str, ...]) -> tuple[str, ...]:
    # Install order does not matter to apt or pip; sorting makes the image
    # hash independent of how the list was written.
    twice = sorted({item for item in items if items.count(item) > 1})
    if twice:
        raise ValueError(f"listed twice: {', '.join(twice)}")
    return tuple(sorted(items))


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
    return _sorted_unique(items)


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
        check=_sorted_unique,
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
        check=_sorted_unique,
        example="[htop, numactl]",
        description="Extra apt packages.",
    )
    pip: tuple[str, ...] = field(
        (),
        items_pattern=_PACKAGE,
        check=_sorted_unique,
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
class Slurm:
    """#SBATCH options for `builder slurm`."""

    partition: str | None = field(None, example="gpu", description="Partition (-p).")
    account: str | None = field(None, example="myproject", description="Account (-A).")
    time: str | None = field(None, example="'02:00:00'", description="Wall time, e.g. 02:00:00.")
    gpus_per_node: int | None = field(None, ge=0, example="8", description="GPUs per node.")
    cpus_per_node: int | None = field(
        None,
        ge=1,
        le=100000,
        example="64",
        description=(
            "CPUs of each node for the run: all its ranks and their data loaders. Its one "
            "task gets them all (torchrun, deepspeed), or each rank's task an equal share "
            "(launcher srun: cpus_per_node / slots). This or cpus_per_task is required by "
            "`builder slurm`: without it many sites give a task one CPU."
        ),
    )
    cpus_per_task: int | None = field(
        None,
        ge=1,
        le=100000,
        example="8",
        description=(
            "CPUs of each Slurm task, as sbatch's --cpus-per-task: the node's one task "
            "(torchrun, deepspeed: all its ranks), or one rank (launcher srun). Prefer "
            "cpus_per_node, which means the same whichever launcher runs; not both."
        ),
    )
    runtime: str = field(
        "apptainer",
        choices=runtimes.names,
        description=(
            "Runtime of the batch script (`builder slurm --runtime` overrides): apptainer, "
            "singularity, pyxis (enroot containers made by srun) or none. Not "
            "launch.runtime: docker under srun escapes the job."
        ),
    )
    docker: bool = field(
        False,
        description=(
            "Accept runtime docker under srun anyway: its containers are dockerd's children, "
            "outside the job's cgroup (they see every device and survive scancel)."
        ),
    )
    exclusive: bool = field(
        False,
        description=(
            "Whole nodes (#SBATCH --exclusive): every CPU and GPU of each node, and no other "
            "job beside this one. Memory is still only what is asked for: add mem: '0'."
        ),
    )
    mem: str | None = field(
        None,
        pattern=r"0|[1-9][0-9]{0,9}[KMGT]?",
        example="500G",
        description="Memory per node (#SBATCH --mem), e.g. 500G; '0' is all of each node's.",
    )
    gpus_per_task: int | None = field(
        None,
        ge=1,
        le=64,
        example="1",
        description=(
            "GPUs bound to each task (#SBATCH --gpus-per-task): times the tasks of a node "
            "it must equal the node's GPUs (gpus_per_node, default slots)."
        ),
    )
    gpu_bind: str | None = field(
        None,
        example="closest",
        pattern=r"none|closest|(verbose,)?(closest|none|per_task:[0-9]{1,2}|single:[0-9]{1,2}"
        r"|map_gpu:[0-9*,]{1,256}|mask_gpu:[0-9a-fA-Fx*,]{1,256})",
        description="How tasks are bound to GPUs (#SBATCH --gpu-bind): closest, none, "
        "per_task:N, single:N, map_gpu:LIST or mask_gpu:LIST.",
    )
    requeue: int | None = field(
        None,
        ge=10,
        le=86400,
        example="300",
        description=(
            "Seconds before the time limit at which the job stops its run and requeues "
            "itself (#SBATCH --requeue, --signal=B:USR1@SECONDS): the ranks get SIGTERM "
            "(then SIGKILL after Slurm's KillWait) to save a checkpoint, and the requeued "
            "job (same id, SLURM_RESTART_COUNT one higher) resumes from it. The path for "
            "launchers without restarts (deepspeed) as for torchrun."
        ),
    )
    extra: tuple[str, ...] = field(
        (),
        example="['--mail-type=END', '--constraint=a100']",
        description=(
            "Further #SBATCH options, each one option as sbatch reads it: "
            "['--mail-type=END', '--constraint=a100', '--reservation=r1']. Options builder "
            "sets itself (nodes, tasks, CPUs, GPUs, output, the fields above) are refused: "
            "set their field instead."
        ),
    )


DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
"""A Kubernetes DNS-1123 label: a namespace's, a volume's, a pod hostname's part."""
DNS_SUBDOMAIN = rf"(?=.{{1,253}}$){DNS_LABEL}(\.{DNS_LABEL})*"
"""A DNS-1123 subdomain: the names of claims, secrets, runtimes, storage classes."""
_QUALIFIED_PART = r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]"
QUALIFIED_NAME = rf"({DNS_SUBDOMAIN}/)?{_QUALIFIED_PART}"
"""A qualified name ([prefix/]name): a label key, a resource name (nvidia.com/gpu)."""
LABEL_VALUE = rf"({_QUALIFIED_PART})?"
"""A label value: at most 63 letters, digits, '-', '_', '.', alphanumeric at both ends."""
QUANTITY = r"(0|[1-9][0-9]{0,17})(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?"
"""A Kubernetes quantity as builder writes sizes: a whole number and a suffix (64Gi)."""
KUBERNETES_JOBS = ("trainjob", "pytorchjob")


def _kubernetes_name(pattern: str, what: str) -> Check:
    def check(value: str) -> str:
        if not re.fullmatch(pattern, value):
            raise ValueError(f"{value!r} is not {what}")
        return value

    return check


_DNS_LABEL_CHECK = _kubernetes_name(
    DNS_LABEL, "a DNS-1123 label (at most 63 of a-z, 0-9 and '-', alphanumeric at both ends)"
)
_SUBDOMAIN_CHECK = _kubernetes_name(
    DNS_SUBDOMAIN,
    "a DNS-1123 subdomain (lower-case labels of a-z, 0-9 and '-' joined by '.', at most 253)",
)
_QUALIFIED_CHECK = _kubernetes_name(
    QUALIFIED_NAME,
    "a qualified name ([prefix/]name: name at most 63 of letters, digits, '-', '_', '.', "
    "alphanumeric at both ends; prefix a DNS-1123 subdomain), e.g. rdma/hca_shared_devices_a",
)
_LABEL_VALUE_MESSAGE = (
    "a label value (at most 63 letters, digits, '-', '_' and '.', alphanumeric at both ends)"
)


def _label_value(value: str) -> str:
    if not value or not re.fullmatch(LABEL_VALUE, value):
        raise ValueError(f"{value!r} is not {_LABEL_VALUE_MESSAGE}")
    return value


MULTUS_NETWORK = rf"({DNS_LABEL}/)?{DNS_SUBDOMAIN}(@[A-Za-z0-9_.-]{{1,15}})?"
"""One Multus network selection: [namespace/]name[@interface]."""


def _network_check(value: str) -> str:
    if not re.fullmatch(MULTUS_NETWORK, value):
        raise ValueError(
            f"{value!r} is not a Multus network: [namespace/]name[@interface], the name a "
            "DNS-1123 subdomain (e.g. rdma-net or team/rdma-net@net1)"
        )
    return value


def _node_selector(selector: dict[str, str]) -> dict[str, str]:
    for key, value in selector.items():
        _QUALIFIED_CHECK(key)
        if not re.fullmatch(LABEL_VALUE, value):
            raise ValueError(f"{key}: {value!r} is not {_LABEL_VALUE_MESSAGE}")
    return dict(sorted(selector.items()))


def _pull_secrets(names: tuple[str, ...]) -> tuple[str, ...]:
    for name in names:
        _SUBDOMAIN_CHECK(name)
    return _sorted_unique(names)


@dataclass(frozen=True)
class Toleration:
    """One pod toleration (a node taint the run's pods may be placed on)."""

    key: str | None = field(
        None,
        check=_QUALIFIED_CHECK,
        example="nvidia.com/gpu",
        description="The taint's key (a qualified name); unset with operator Exists: every taint.",
    )
    operator: str = field(
        "Equal", choices=lambda: ("Equal", "Exists"), description="Equal or Exists."
    )
    value: str | None = field(
        None,
        check=_label_value,
        example="present",
        description="The taint's value (operator Equal).",
    )
    effect: str | None = field(
        None,
        choices=lambda: ("NoSchedule", "PreferNoSchedule", "NoExecute"),
        example="NoSchedule",
        description="NoSchedule, PreferNoSchedule or NoExecute; unset: every effect.",
    )


@dataclass(frozen=True)
class Kubernetes:
    """Options of `builder kubernetes` (Kubeflow Trainer TrainJob or PyTorchJob manifests)."""

    job: str = field(
        "trainjob",
        choices=lambda: KUBERNETES_JOBS,
        description=(
            "trainjob (Kubeflow Trainer v2: torch for torchrun, MPI for deepspeed, "
            "gaudi_spawn and mpirun) or pytorchjob (the Training Operator's kubeflow.org/v1; "
            "torchrun only). `builder kubernetes --job` overrides."
        ),
    )
    runtime: str | None = field(
        None,
        check=_SUBDOMAIN_CHECK,
        example="torch-distributed",
        description=(
            "An existing ClusterTrainingRuntime the TrainJob names instead of the namespaced "
            "TrainingRuntime builder writes (trainjob only); the run's volumes, node "
            "selector and tolerations then go in the TrainJob's runtimePatches."
        ),
    )
    namespace: str | None = field(
        None,
        check=_DNS_LABEL_CHECK,
        example="training",
        description="Namespace of every object; unset: kubectl's current one.",
    )
    queue: str | None = field(
        None,
        check=_label_value,
        example="team-a",
        description="Kueue LocalQueue: the job's kueue.x-k8s.io/queue-name label.",
    )
    node_selector: dict[str, str] = field(
        default_factory=dict,
        check=_node_selector,
        example="{nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}",
        description="Node labels the run's pods must have (label keys and values).",
    )
    tolerations: tuple[Toleration, ...] = field(
        (),
        example="[{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]",
        description="Taints the run's pods tolerate.",
    )
    image_pull_secrets: tuple[str, ...] = field(
        (),
        check=_pull_secrets,
        example="[registry-login]",
        description="Secrets (docker-registry) the nodes pull the image with.",
    )
    code_claim: str | None = field(
        None,
        check=_SUBDOMAIN_CHECK,
        example="team-code",
        description=(
            "The site's PersistentVolumeClaim holding launch.code, mounted at image.workdir; "
            "unset (with launch.code set): builder writes a claim NAME-code."
        ),
    )
    cache_claim: str | None = field(
        None,
        check=_SUBDOMAIN_CHECK,
        example="team-cache",
        description=(
            "The site's PersistentVolumeClaim for launch.cache, mounted at launch.cache; "
            "unset (with launch.cache set): builder writes a claim NAME-cache."
        ),
    )
    claim_size: str = field(
        "100Gi",
        pattern=QUANTITY,
        description="Storage each claim builder writes asks for (ReadWriteMany).",
    )
    storage_class: str | None = field(
        None,
        check=_SUBDOMAIN_CHECK,
        example="nfs-client",
        description="StorageClass of the claims builder writes; unset: the cluster's default.",
    )
    shm_size: str | None = field(
        None,
        pattern=QUANTITY,
        example="64Gi",
        description=(
            "sizeLimit of the memory-backed /dev/shm (an emptyDir, medium Memory); unset: "
            "bounded by the pod's memory only."
        ),
    )
    rdma_resource: str | None = field(
        None,
        check=_QUALIFIED_CHECK,
        example="rdma/hca_shared_devices_a",
        description=(
            "The RDMA device resource of image.fabric infiniband or roce (the RDMA shared "
            "device plugin's name is the site's); default rdma/rdma_shared_device_a. EFA: "
            "vpc.amazonaws.com/efa unless set."
        ),
    )
    host_network: bool = field(
        False,
        description=(
            "Run the pods on their nodes' network (hostNetwork, with dnsPolicy "
            "ClusterFirstWithHostNet): the host's interfaces, for launch.socket_ifname and "
            "an RDMA fabric (infiniband, roce). With launch.kubernetes.runtime the named "
            "ClusterTrainingRuntime must set it itself (Trainer's runtimePatches cannot)."
        ),
    )
    network: str | None = field(
        None,
        check=_network_check,
        example="rdma-net",
        description=(
            "A secondary network for the pods: a Multus NetworkAttachmentDefinition, "
            "[namespace/]name[@interface] (the k8s.v1.cni.cncf.io/networks annotation); "
            "launch.socket_ifname then names its interface in the pod (Multus: net1 "
            "unless @interface names one)."
        ),
    )
    fabric_devices: int = field(
        1,
        ge=1,
        le=64,
        description="How many of the fabric's device resource each pod asks for (EFA: 32 on p5).",
    )


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
    master_addr: str | None = field(None, example="gpu01", description="Default: the first node.")
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
        check=_sorted_unique,
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
    slurm: Slurm = field(default_factory=Slurm)
    kubernetes: Kubernetes = field(default_factory=Kubernetes)

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
    "Kubernetes",
    "LaunchSpec",
    "Mount",
    "Slurm",
    "Spec",
    "Toleration",
    "User",
]

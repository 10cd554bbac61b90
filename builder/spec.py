"""The stack spec: closed, frozen, typed models for stack.yaml.

Two sections with a hard wall between them: ``image`` is everything baked
into the image (and so into its hash), ``launch`` is everything about how
the image is started on nodes. Changing the node list must never change the
image, so nothing under ``launch`` may be read by the renderers.

Cross-field rules that need accelerator knowledge (a torch version the CUDA
wheel index lacks, a Gaudi stack on a CUDA base, ...) live in
``stacks.check_image`` so that they can report several problems at once,
each with its own field path.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_IMAGE_NAME = re.compile(
    r"^[a-z0-9]+([._-]{1,2}[a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]{1,2}[a-z0-9]+)*)*$"
)
_IMAGE_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*([a-z0-9.+-]*)?$")
_PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+:=<>!~,\[\]@/ -]*$")
_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


class _Model(BaseModel):
    """Closed and frozen: unknown keys are errors, values never change."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class Accelerator(str, Enum):
    """What the image computes on; decides base image, torch build and run flags."""

    cuda = "cuda"
    gaudi = "gaudi"
    cpu = "cpu"


Version = Annotated[str, Field(pattern=_VERSION.pattern)]
EnvMap = dict[Annotated[str, Field(pattern=_ENV_NAME.pattern)], str]
Port = Annotated[int, Field(ge=1, le=65535)]


def _check_env_values(env: dict[str, str]) -> dict[str, str]:
    if "PATH" in env:
        raise ValueError(
            "PATH is managed by builder (the venv goes in front of the base image's PATH); "
            "add directories with another variable or install into the venv"
        )
    for key, value in env.items():
        if "\n" in value or "\r" in value or "\0" in value:
            raise ValueError(f"the value of {key} contains a newline or NUL; put it on one line")
    return env


class SSH(_Model):
    """sshd inside the image, so pdsh/DeepSpeed can reach every node."""

    enabled: bool = Field(True, description="Install and configure sshd and the ssh client.")
    port: Port = Field(
        3022,
        description=(
            "Port sshd listens on AND the ssh client's default port, so pdsh and "
            "DeepSpeed need no --ssh_port. Not 22: with host networking the host's "
            "own sshd owns 22."
        ),
    )


class User(_Model):
    """The account training runs as; sshd itself always starts as root."""

    name: str = Field("root", pattern=_USER.pattern, description="Login name.")
    uid: int = Field(1000, ge=1, le=2**31 - 2, description="UID when name is not root.")


class ImageSpec(_Model):
    """Everything baked into the image. Any change here changes the image hash."""

    name: str = Field(
        "builder/stack",
        pattern=_IMAGE_NAME.pattern,
        description="Image repository name, e.g. team/train.",
    )
    tag: str = Field("latest", pattern=_TAG.pattern, description="Image tag.")
    accelerator: Accelerator = Field(description="cuda, gaudi or cpu.")
    base: str | None = Field(
        None,
        pattern=_IMAGE_REF.pattern,
        description="Base image; default derived from accelerator, cuda/synapse and os.",
    )
    os: str | None = Field(
        None, description="OS of the base image: ubuntu22.04, ubuntu24.04 or bookworm."
    )
    cuda: Version | None = Field(None, description="CUDA toolkit version (cuda only), e.g. 12.8.1.")
    synapse: Version | None = Field(
        None, description="Intel Gaudi SynapseAI release (gaudi only), e.g. 1.22.0."
    )
    python: Version | None = Field(
        None, description="Python version; must be the base OS's python3 (checked)."
    )
    torch: Version | None = Field(
        None,
        description="torch version (gaudi: fixed by the SynapseAI release; leave unset).",
    )
    torch_index: str | None = Field(
        None,
        description="pip index for torch; default derived from accelerator and CUDA version.",
    )
    deepspeed: str | None = Field(
        None,
        description=(
            "DeepSpeed version from PyPI (cuda, cpu) or the HabanaAI/DeepSpeed tag "
            "(gaudi: must equal the SynapseAI release). Unset: no DeepSpeed."
        ),
    )
    apt: tuple[Annotated[str, Field(pattern=_PACKAGE.pattern)], ...] = Field(
        (), description="Extra Debian/Ubuntu packages."
    )
    pip: tuple[Annotated[str, Field(pattern=_PACKAGE.pattern)], ...] = Field(
        (), description="Extra pip requirements (pin them: name==version)."
    )
    requirements: str | None = Field(
        None,
        description="requirements.txt path, relative to the spec file; installed last.",
    )
    env: EnvMap = Field(default_factory=dict, description="Environment baked into the image.")
    ssh: SSH = Field(default_factory=SSH)
    pdsh: bool = Field(True, description="Install pdsh (DeepSpeed's default multi-node launcher).")
    openmpi: bool = Field(False, description="Install OpenMPI (for mpirun launches).")
    user: User = Field(default_factory=User)
    workdir: str = Field("/workspace", pattern=r"^/[^\s]*$", description="Working directory.")
    labels: dict[str, str] = Field(default_factory=dict, description="Extra image labels.")

    @field_validator("env")
    @classmethod
    def _env_on_one_line(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_env_values(value)

    @field_validator("apt", "pip")
    @classmethod
    def _sorted_without_duplicates(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        # Install order does not matter to apt or pip; sorting here makes the
        # image hash independent of how the list was written.
        seen = {item for item in value if value.count(item) > 1}
        if seen:
            raise ValueError(f"listed twice: {', '.join(sorted(seen))}")
        return tuple(sorted(value))


class Mount(_Model):
    """A host path bind-mounted into every node's container."""

    source: str = Field(min_length=1, description="Host path.")
    target: str = Field(pattern=r"^/", description="Path inside the container.")
    read_only: bool = Field(False, description="Mount read-only.")


class Slurm(_Model):
    """#SBATCH options for `builder slurm`."""

    partition: str | None = None
    account: str | None = None
    time: str | None = Field(None, description="Wall time, e.g. 02:00:00.")
    gpus_per_node: int | None = Field(None, ge=0)
    cpus_per_task: int | None = Field(None, ge=1)
    extra: dict[str, str] = Field(
        default_factory=dict, description="Further #SBATCH options, e.g. {exclusive: ''}."
    )


Launcher = Literal["deepspeed", "torchrun", "gaudi_spawn", "mpirun"]
Runtime = Literal["docker", "apptainer", "singularity", "none"]


class LaunchSpec(_Model):
    """How the image is started on nodes. Never read by the image renderers."""

    launcher: Launcher = "deepspeed"
    runtime: Runtime = "docker"
    nodes: tuple[Annotated[str, Field(min_length=1)], ...] = Field(
        ("node1", "node2"),
        min_length=1,
        description="Host names or Slurm node lists (gpu[01-04]); order = node rank.",
    )
    slots: int = Field(1, ge=1, le=1024, description="Processes (accelerators) per node.")
    master_addr: str | None = Field(None, description="Default: the first node.")
    master_port: Port = 29500
    mounts: tuple[Mount, ...] = ()
    env: EnvMap = Field(
        default_factory=dict,
        description="Run-time environment (NCCL_*, HCCL_*, ...); also goes to .deepspeed_env.",
    )
    script: str = Field("train.py", min_length=1, description="Training script to launch.")
    args: tuple[str, ...] = Field((), description="Arguments passed to the script.")
    slurm: Slurm = Field(default_factory=Slurm)

    @field_validator("env")
    @classmethod
    def _env_on_one_line(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_env_values(value)


class Spec(_Model):
    """A whole stack: what to bake and how to launch it."""

    version: Literal[1] = Field(1, description="Spec format version.")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", description="Stack name.")
    description: str = ""
    image: ImageSpec
    launch: LaunchSpec = Field(default_factory=LaunchSpec)


def spec_json_schema() -> dict[str, Any]:
    """JSON Schema of stack.yaml, for editors (yaml-language-server)."""
    schema = Spec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "builder stack spec"
    return schema

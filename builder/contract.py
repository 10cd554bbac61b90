"""Names the parts of builder agree on: labels, paths in images and on nodes.

Images carry these labels, containers find the cluster folder here, the
build, the lock and the fingerprint look for the same paths. This module
imports nothing of builder, so every other module may import it.
"""

from __future__ import annotations

LABEL_PREFIX = "io.github.builder"
SPEC_HASH_LABEL = f"{LABEL_PREFIX}.spec-hash"
ACCELERATOR_LABEL = f"{LABEL_PREFIX}.accelerator"
PRESET_LABEL = f"{LABEL_PREFIX}.preset"
DEEPSPEED_OPS_LABEL = f"{LABEL_PREFIX}.deepspeed-ops"
"""The DeepSpeed ops compiled into the image, comma-separated."""
ARCHS_LABEL = f"{LABEL_PREFIX}.archs"
"""The GPU architectures its ops are compiled for, ';'-separated as the variable has them."""
SSH_PORT_LABEL = f"{LABEL_PREFIX}.ssh-port"
VERSION_LABEL = f"{LABEL_PREFIX}.version"
DOCKERFILE_LABEL = f"{LABEL_PREFIX}.dockerfile-sha256"
SYSTEM_STAGE_LABEL = f"{LABEL_PREFIX}.system-stage"
REHEARSAL_LABEL = f"{LABEL_PREFIX}.rehearsal"
"""On every container and network a rehearsal starts (its id), for teardown."""
REHEARSAL_BASE_LABEL = f"{LABEL_PREFIX}.rehearsal-base"
"""On a derived rehearsal image (Slurm added): the id of the image it was made from."""
BASE_NAME_LABEL = "org.opencontainers.image.base.name"

CLUSTER_DIR = "/etc/builder/cluster"
"""Where the cluster folder (key pair, hostfile, .deepspeed_env) is mounted read-only."""
HOSTFILE = "hostfile"
JOB_LOGS = "logs"
"""A batch job's logs in the cluster folder: logs/JOBID/NODE.out, each node's output, and
what its launcher writes beside it (torchrun: ranks-NODE/, error-NODE.json)."""
JOB_HOSTFILE = "hostfile-"
"""A batch job's hostfile in the cluster folder: this, then the job's id (the script
writes it from the job's nodes before srun)."""
DSENV = ".deepspeed_env"
CHECKPOINTS_VARIABLE = "BUILDER_CHECKPOINTS"
"""Names launch.checkpoints (the shared checkpoint folder) to every rank."""

VENV = "/opt/venv"
"""The image's virtual environment (its bin/ leads PATH)."""
TORCH_DIR = "/opt/torch"
"""torch and its dependencies, a layer of their own, seen by the venv through a .pth."""

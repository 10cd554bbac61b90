"""Apptainer (or Singularity): the SIF from the local Docker engine, and `exec` per node.

`apptainer build x.sif docker-daemon://name:tag` needs an explicit tag.
Nodes run ``apptainer exec --nv --cleanenv``: host network and IPC are
shared by default (what NCCL wants); with --cleanenv only what we pass gets
in, as ``APPTAINERENV_NAME=value`` in the environment of the command, which
carries any value (``--env`` splits on commas).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from builder.errors import UsageError
from builder.rootfs import CLUSTER_DIR
from builder.spec import Accelerator

if TYPE_CHECKING:
    from builder.spec import Spec

PROGRAMS = ("apptainer", "singularity")


def sif_name(image: str) -> str:
    """team/train:1.0 -> train-1.0.sif"""
    name, tag = _split(image)
    return f"{name.rsplit('/', 1)[-1]}-{tag}.sif"


def sif_build_argv(
    image: str, *, output: str | None = None, program: str = "apptainer"
) -> list[str]:
    """Build a SIF from an image of the local Docker engine."""
    _split(image)
    if program not in PROGRAMS:
        raise UsageError(f"{program!r}: choose apptainer or singularity")
    return [program, "build", output or sif_name(image), f"docker-daemon://{image}"]


def exec_argv(
    spec: Spec, *, sif: str, command: list[str], cluster_dir: str | None, program: str = "apptainer"
) -> list[str]:
    """`apptainer exec` of command on one node, with the stack's env, binds and GPUs."""
    prefix = "APPTAINERENV_" if program == "apptainer" else "SINGULARITYENV_"
    env = [f"{prefix}{key}={value}" for key, value in sorted(spec.launch.env.items())]
    argv = (["env", *env] if env else []) + [program, "exec", "--cleanenv"]
    if spec.image.accelerator is Accelerator.cuda:
        argv.append("--nv")
    if cluster_dir is not None:
        argv += ["--bind", f"{cluster_dir}:{CLUSTER_DIR}:ro"]
    for mount in spec.launch.mounts:
        if ":" in mount.source + mount.target:
            raise UsageError(f"mount {mount.source} holds ':', which --bind cannot carry")
        argv += ["--bind", f"{mount.source}:{mount.target}" + (":ro" if mount.read_only else "")]
    return [*argv, sif, *command]


def _split(image: str) -> tuple[str, str]:
    match = re.match(r"^(.+):([A-Za-z0-9_][A-Za-z0-9_.-]*)$", image)
    if match is None or "/" in match[2]:
        raise UsageError(
            f"{image!r} has no tag; docker-daemon:// needs name:tag (e.g. {image}:latest)"
        )
    return match[1], match[2]

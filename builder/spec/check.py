"""The rules across fields of a spec: what cannot work together.

Each platform and launcher checks what only it knows (a torch version the
CUDA wheel index lacks, gaudi_spawn's fixed port); what they share is here:
a key of another platform, a base image of another platform's family, an
unknown OS, a Python the OS does not ship, pdsh without ssh. Every problem
is reported with its field path, all at once.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from builder import platforms
from builder.cluster.nodelist import count_nodelist, expand_nodelist
from builder.contract import TORCH_DIR, VENV
from builder.fabrics import FABRICS
from builder.launch import launchers
from builder.launch.actions import normal_path
from builder.launch.runtimes import runtime
from builder.model import did_you_mean
from builder.platforms.base import OSES, TORCH_MIN_PYTHON, minor_of, version_key

if TYPE_CHECKING:
    from builder.spec.records import ImageSpec, LaunchSpec, Spec

Problems = list[tuple[str, str]]

_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s@]*@")
"""A URL with credentials (user:password@ or token@) before its host."""
CREDENTIALS_ADVICE = (
    "a URL here carries credentials (user:password@ or token@), which would stay in the "
    "build stage's image history and in a .def's %post (Apptainer keeps it in the SIF). Use a "
    "mirror that needs no credentials from the build, or download the wheels with your "
    "own credentials (`pip download -d wheels ...`) and pass --wheelhouse wheels"
)


def has_credentials(text: str) -> bool:
    """Whether text holds a URL with user information (credentials)."""
    return _USERINFO.search(text) is not None


def check_spec(spec: Spec) -> Problems:
    """Combinations that cannot work, as (field path, what to do) pairs."""
    return check_image(spec.image) + launcher_problems(spec.image, spec.launch) + run_problems(spec)


SSH_PORT = 22
"""The host's own sshd."""
IMAGE_PATHS = (VENV, TORCH_DIR, "/etc/builder", "/etc/ssh", "/usr", "/bin", "/lib", "/sbin")
"""What a bind may neither cover nor go inside: the image's own software (a bind inside
/opt/venv/lib or /usr/local/bin hides what the image installed there) and builder's
mount points (the cluster folder, the probe's)."""
RUNTIME_PATHS = ("/dev/shm", "/proc", "/sys")
"""What every runtime mounts in a container itself: the shared memory the ranks talk
through (a Kubernetes pod's memory volume at /dev/shm, docker's --ipc host), and the
kernel's own folders."""


def run_problems(spec: Spec) -> Problems:
    """Ports and binds of the run that collide with each other or with the image."""
    launch, image = spec.launch, spec.image
    problems: Problems = []
    if image.ssh.enabled and launch.master_port == image.ssh.port:
        problems.append(
            (
                "launch.master_port",
                f"{launch.master_port} is image.ssh.port, where sshd listens on every node: "
                "the rendezvous needs a port of its own (default 29500)",
            )
        )
    node = runtime(launch.runtime)
    if image.ssh.enabled and image.ssh.port == SSH_PORT and node.serves_ssh and node.isolated:
        problems.append(
            (
                "image.ssh.port",
                "22 is the host's own sshd: with host networking the image's sshd cannot "
                "listen there; choose another port (default 3022)",
            )
        )
    if launch.mnnvl and platforms.get(image.accelerator).mnnvl_env is None:
        problems.append(
            (
                "launch.mnnvl",
                f"multi-node NVLink (IMEX channels) is NVIDIA's: {image.accelerator} images "
                "have none; remove it, or use accelerator: cuda",
            )
        )
    if launch.node_slots:
        listed = {name for entry in launch.nodes for name in expand_nodelist(entry)}
        strangers = sorted(set(launch.node_slots) - listed)
        if strangers:
            problems.append(
                (
                    "launch.node_slots",
                    f"{', '.join(strangers[:5])}: not in launch.nodes; node_slots gives a "
                    "node of launch.nodes its own processes",
                )
            )
    nodes = sum(map(count_nodelist, launch.nodes))
    if launch.min_nodes is not None and launch.min_nodes > nodes:
        problems.append(
            (
                "launch.min_nodes",
                f"{launch.min_nodes} is more than the {nodes} node(s) of launch.nodes: the "
                "run could never start; give at most that many",
            )
        )
    for where, value in (
        ("launch.node_timeout", launch.node_timeout),
        ("launch.last_call", launch.last_call),
    ):
        if value is not None and launch.min_nodes is None:
            problems.append(
                (
                    where,
                    "only an elastic run (launch.min_nodes) gives a node up or waits a last "
                    "call for more: set launch.min_nodes, or leave it out",
                )
            )
    targets = list(launch.own_path_folders())
    if launch.code:
        targets.insert(0, ("launch.code", image.workdir))
    targets += [(f"launch.mounts[{i}].target", m.target) for i, m in enumerate(launch.mounts)]
    seen: dict[str, str] = {}
    for where, target in targets:
        path = normal_path(target)
        covered = [p for p in (*IMAGE_PATHS, *RUNTIME_PATHS) if _overlaps(path, p)]
        if covered:
            how = "over" if covered[0].startswith(path.rstrip("/") + "/") else "inside"
            problems.append(
                (
                    where,
                    f"{target} would be mounted {how} {covered[0]}, which the image, builder or "
                    "the runtime needs as it is: choose a path of its own, e.g. under /data "
                    "or /shared",
                )
            )
        elif path in seen:
            problems.append(
                (
                    where,
                    f"{target} is mounted at already ({seen[path]}): docker refuses two "
                    "binds on one path; give each its own",
                )
            )
        seen.setdefault(path, where)
    return problems


def _overlaps(path: str, protected: str) -> bool:
    """A bind at path would cover protected (path is it, or a folder above it) or go
    inside it."""
    return (
        path == protected
        or protected.startswith(path.rstrip("/") + "/")
        or path.startswith(protected + "/")
    )


def fabric_problems(image: ImageSpec) -> Problems:
    """image.fabric against the collective library of the image's platform."""
    chosen = FABRICS.get(image.fabric)
    library = platforms.get(image.accelerator).collective
    if chosen is None or library.runs_over(chosen):
        return []
    serves = [p.name for p in platforms.every() if p.collective.runs_over(chosen)]
    fits = [name for name, one in FABRICS.items() if library.runs_over(one)]
    return [
        (
            "image.fabric",
            f"{image.fabric} ({chosen.summary}) is not for {image.accelerator} images, only "
            f"{', '.join(serves)}; choose one of {', '.join(fits)}",
        )
    ]


def check_image(image: ImageSpec) -> Problems:
    platform = platforms.get(image.accelerator)
    problems: Problems = []
    for key in image.versions:
        owner = platforms.owner(key)
        if owner is not platform:
            problems.append(
                (
                    f"image.{key}",
                    f"{key} is only for accelerator: {owner.name} (this is {platform.name})",
                )
            )
    if image.base:
        for other in platforms.every():
            if other is not platform and other.base_family and other.base_family.search(image.base):
                problems.append(
                    (
                        "image.base",
                        f"{image.base!r} is a {other.name} image but accelerator is "
                        f"{platform.name}; use a {platform.name} base or leave base unset",
                    )
                )
    if image.os and image.os not in OSES:
        hint = did_you_mean(image.os, OSES)
        problems.append(("image.os", f"{image.os!r} is not one of {', '.join(OSES)}{hint}"))
    problems += platform.problems(image)
    problems += platform.architecture_problems(image)
    problems += platform.deepspeed_problems(image)
    problems += fabric_problems(image)
    os_name = platform.os_of(image)
    python = image.python or (OSES[os_name].python if os_name in OSES else None)
    floor = TORCH_MIN_PYTHON.get(minor_of(image.torch or ""))
    if (
        floor
        and python
        and platform.installs_torch(image)
        and version_key(python) < version_key(floor)
    ):
        problems.append(
            (
                "image.torch",
                f"torch {image.torch} has wheels for Python {floor} and newer only, and "
                f"{os_name or 'the base'} has Python {python}: set os: ubuntu24.04 (Python "
                "3.12) or choose an older torch",
            )
        )
    if image.python and os_name in OSES and OSES[os_name].python != image.python:
        problems.append(
            (
                "image.python",
                f"{os_name} ships Python {OSES[os_name].python}, not {image.python}; "
                f"set python to {OSES[os_name].python!r} or choose another base/os",
            )
        )
    if image.torch_index and has_credentials(image.torch_index):
        problems.append(("image.torch_index", CREDENTIALS_ADVICE))
    problems += [
        (f"image.pip[{i}]", CREDENTIALS_ADVICE)
        for i, entry in enumerate(image.pip)
        if has_credentials(entry)
    ]
    if image.pdsh and not image.ssh.enabled:
        problems.append(
            ("image.pdsh", "pdsh reaches nodes over ssh: enable image.ssh or drop pdsh")
        )
    return problems


def launcher_problems(image: ImageSpec, launch: LaunchSpec) -> Problems:
    """What the launcher needs from the image (also checked for --launcher overrides)."""
    problems = [
        (
            "launch.secret",
            f"{name} is not in launch.env; a secret names a launch.env variable "
            "(set its value there, or drop it from launch.secret)",
        )
        for name in launch.secret
        if name not in launch.env
    ]
    return problems + launchers.get(launch.launcher).problems(image, launch)

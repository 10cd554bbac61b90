"""The image recipe: every decision about what goes into the image, format-free.

``image_recipe`` turns a Stack into a ``Recipe`` (install steps, files,
environment, labels). The Dockerfile and the Apptainer .def are both laid out
from this one object by ``render``; templates never decide anything.

Layer order follows how often things change: OS packages, then the venv
(torch, then DeepSpeed, then extra pip packages, then the user's
requirements, which change most), then config files and metadata.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from builder.errors import UsageError
from builder.model import dump
from builder.rootfs import ContextFile, rootfs_files
from builder.spec import Accelerator
from builder.stacks import BUILD_TOOLS, HABANA_DEEPSPEED, VENV, resolve_image

if TYPE_CHECKING:
    from builder.loader import Stack
    from builder.stacks import ResolvedImage

LABEL_PREFIX = "io.github.builder"
REQUIREMENTS_FILE = "requirements.txt"
REQUIREMENTS_TARGET = "/tmp/builder/requirements.txt"
PATH_PREFIX = f"{VENV}/bin"
"""Put in front of the base image's own PATH (CUDA and Habana bases extend it)."""
_PIP = f"{VENV}/bin/pip install --no-cache-dir"


@dataclass(frozen=True)
class Step:
    """One install step: files it needs copied in, then shell commands in order.

    A newline inside a command marks where a long command (a package list)
    continues on the next line; each format writes its own continuation.
    """

    comment: str
    commands: tuple[str, ...]
    copies: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Recipe:
    """Everything both renderers need; no format-specific decisions inside."""

    name: str
    source: str
    base: str
    system: tuple[Step, ...]
    python: tuple[Step, ...]
    python_cleanup: tuple[str, ...]
    files: tuple[ContextFile, ...]
    env: tuple[tuple[str, str], ...]
    path_prefix: str
    labels: tuple[tuple[str, str], ...]
    workdir: str
    ports: tuple[int, ...]
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    help: tuple[str, ...]
    test: tuple[str, ...] = field(default=())


def image_recipe(stack: Stack) -> Recipe:
    """Decide the whole image for a stack (pure: reads only the requirements file)."""
    image = stack.spec.image
    resolved = resolve_image(image)
    requirements = _requirements_text(stack)
    files = rootfs_files(stack.spec, resolved)
    if requirements is not None:
        files = (*files, ContextFile(REQUIREMENTS_FILE, REQUIREMENTS_TARGET, 0o644, requirements))
    ssh = image.ssh.enabled
    env = {
        "VIRTUAL_ENV": VENV,
        "PYTHONUNBUFFERED": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        **resolved.env,
    }
    return Recipe(
        name=stack.spec.name,
        source=stack.source,
        base=resolved.base,
        system=_system_steps(stack, resolved),
        python=_python_steps(stack, resolved, has_requirements=requirements is not None),
        python_cleanup=("rm -rf /tmp/builder",) if requirements is not None else (),
        files=files,
        env=tuple(sorted(env.items())),
        path_prefix=PATH_PREFIX,
        labels=tuple(sorted(_labels(stack, resolved, requirements).items())),
        workdir=image.workdir,
        ports=(image.ssh.port,) if ssh else (),
        entrypoint=("/usr/local/bin/builder-entrypoint",) if _needs_entrypoint(stack) else (),
        cmd=("/usr/sbin/sshd", "-D", "-e") if ssh else ("/bin/bash",),
        help=_help_text(stack, resolved),
        test=_smoke_test(stack, resolved),
    )


def spec_hash(stack: Stack, requirements: str | None = None) -> str:
    """sha256 over the image section and the requirements it installs.

    The launch section is left out on purpose: a new node list must not look
    like a new image.
    """
    text = requirements if requirements is not None else _requirements_text(stack)
    payload = json.dumps(
        {"image": dump(stack.spec.image), "requirements": text},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _requirements_text(stack: Stack) -> str | None:
    rel = stack.spec.image.requirements
    if rel is None:
        return None
    if stack.root is None:
        raise UsageError(
            f"image.requirements: {rel!r} is relative to a spec file, but this stack "
            "is a preset; write it out with `builder init` and load that file"
        )
    path = stack.root / rel
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"image.requirements: cannot read {path} ({exc.strerror or exc}); the path is "
            "relative to the spec file's folder"
        ) from None


def _apt_packages(stack: Stack, resolved: ResolvedImage) -> list[str]:
    image = stack.spec.image
    packages = {"ca-certificates", "python3", "python3-venv"}
    if resolved.deepspeed:
        # DeepSpeed compiles its ops just in time on first use (CPU shm, fused
        # Adam, ...): it needs a C++ compiler and Python headers at run time.
        packages |= {"g++", "python3-dev"}
    if image.ssh.enabled:
        packages |= {"openssh-client", "openssh-server"}
    if image.pdsh:
        packages.add("pdsh")
    if image.openmpi:
        packages |= {"openmpi-bin", "libopenmpi-dev"}
    packages |= set(image.apt)
    return sorted(packages)


def _apt_install(packages: list[str]) -> tuple[str, ...]:
    return (
        "apt-get update",
        "apt-get install -y --no-install-recommends\n" + "\n".join(packages),
        "rm -rf /var/lib/apt/lists/*",
    )


def _system_steps(stack: Stack, resolved: ResolvedImage) -> tuple[Step, ...]:
    install = list(_apt_install(_apt_packages(stack, resolved)))
    if stack.spec.image.ssh.enabled:
        # openssh-server's postinst makes host keys: drop them in this same
        # layer, or every container of the image would share (and leak) them.
        install.append("rm -f /etc/ssh/ssh_host_*")
    steps = [Step("OS packages", tuple(install))]
    user = stack.spec.image.user
    if user.name != "root":
        steps.append(
            Step(
                f"the {user.name} account (login by key only)",
                (
                    f"useradd --create-home --uid {user.uid} --user-group --shell /bin/bash "
                    f"{user.name}",
                    # a locked account ('!') is refused by sshd without PAM
                    f"usermod --password '*' {user.name}",
                    f"mkdir -p {shlex.quote(stack.spec.image.workdir)}",
                    f"chown {user.name}:{user.name} {shlex.quote(stack.spec.image.workdir)}",
                ),
            )
        )
    return tuple(steps)


def _python_steps(
    stack: Stack, resolved: ResolvedImage, *, has_requirements: bool
) -> tuple[Step, ...]:
    image = stack.spec.image
    venv_flags = " --system-site-packages" if resolved.system_site_packages else ""
    steps = []
    if resolved.deepspeed and resolved.accelerator is Accelerator.gaudi:
        # pip clones the HabanaAI fork; git is needed only while building.
        steps.append(Step("build-only tools", _apt_install(["git"])))
    steps += [
        Step(
            "the virtual environment"
            + (" (sees Habana's torch in the system site-packages)" if venv_flags else ""),
            (f"python3 -m venv{venv_flags} {VENV}",),
        )
    ]
    if resolved.torch and resolved.torch_index:
        steps.append(
            Step(
                f"torch {resolved.torch}",
                (f"{_PIP} --index-url {resolved.torch_index} torch=={resolved.torch}",),
            )
        )
    if resolved.deepspeed:
        if resolved.accelerator is Accelerator.gaudi:
            target = HABANA_DEEPSPEED.format(tag=resolved.deepspeed)
        else:
            target = f"deepspeed=={resolved.deepspeed}"
        steps.append(
            Step(
                f"DeepSpeed {resolved.deepspeed} (ops are built just in time, not here)",
                (
                    f"{_PIP} {' '.join(BUILD_TOOLS)}",
                    f"DS_BUILD_OPS=0 {_PIP} --no-build-isolation {shlex.quote(target)}",
                ),
            )
        )
    if image.pip:
        packages = " ".join(shlex.quote(p) for p in sorted(image.pip))
        steps.append(Step("extra pip packages", (f"{_PIP} {packages}",)))
    if has_requirements:
        steps.append(
            Step(
                "the stack's requirements (last: they change most)",
                (f"{_PIP} -r {REQUIREMENTS_TARGET}",),
                copies=((REQUIREMENTS_FILE, REQUIREMENTS_TARGET),),
            )
        )
    return tuple(steps)


def _needs_entrypoint(stack: Stack) -> bool:
    return stack.spec.image.ssh.enabled or stack.spec.image.user.name != "root"


def _labels(stack: Stack, resolved: ResolvedImage, requirements: str | None) -> dict[str, str]:
    spec = stack.spec
    labels = {
        "org.opencontainers.image.title": spec.name,
        "org.opencontainers.image.version": spec.image.tag,
        "org.opencontainers.image.base.name": resolved.base,
        f"{LABEL_PREFIX}.spec-hash": spec_hash(stack, requirements),
        f"{LABEL_PREFIX}.accelerator": resolved.accelerator.value,
    }
    if spec.description:
        labels["org.opencontainers.image.description"] = spec.description
    if stack.preset:
        labels[f"{LABEL_PREFIX}.preset"] = stack.preset
    if spec.image.ssh.enabled:
        labels[f"{LABEL_PREFIX}.ssh-port"] = str(spec.image.ssh.port)
    labels.update(spec.image.labels)
    return labels


def _help_text(stack: Stack, resolved: ResolvedImage) -> tuple[str, ...]:
    spec = stack.spec
    lines = [spec.name + (f": {spec.description}" if spec.description else "")]
    lines.append(f"accelerator: {resolved.accelerator.value}; base: {resolved.base}")
    if resolved.torch:
        lines.append(f"torch: {resolved.torch}")
    if resolved.deepspeed:
        lines.append(f"DeepSpeed: {resolved.deepspeed}")
    if spec.image.ssh.enabled:
        lines.append(f"sshd and ssh client on port {spec.image.ssh.port}")
    return tuple(lines)


def _smoke_test(stack: Stack, resolved: ResolvedImage) -> tuple[str, ...]:
    modules = ["torch"] + (["deepspeed"] if resolved.deepspeed else [])
    commands = [f"{VENV}/bin/python -c 'import {', '.join(modules)}'"]
    if stack.spec.image.ssh.enabled:
        commands.append("command -v sshd")
    return tuple(commands)


__all__ = ["Recipe", "Step", "image_recipe", "spec_hash"]

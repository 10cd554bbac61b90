"""The image recipe: every decision about what goes into the image, format-free.

``image_recipe`` turns a resolved stack (with its build inputs) into a ``Recipe``:
install steps, files, environment, labels. The Dockerfile and the Apptainer
.def are both laid out from this one object by ``render``; templates never
decide anything.

Layer order follows how often things change: OS packages, then the venv
(torch, then DeepSpeed, then extra pip packages, then the user's
requirements, which change most), then config files and metadata.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from builder import platforms
from builder.contract import (
    ACCELERATOR_LABEL,
    ARCHS_LABEL,
    BASE_NAME_LABEL,
    DEEPSPEED_OPS_LABEL,
    PRESET_LABEL,
    SPEC_HASH_LABEL,
    SSH_PORT_LABEL,
    VENV,
)
from builder.errors import UsageError
from builder.image.rootfs import ROOTFS, ContextFile, rootfs_files
from builder.image.steps import (
    BUILD_DIR,
    CA_FILE,
    CA_TARGET,
    DS_OPS_CHECK_FILE,
    DS_OPS_CHECK_TARGET,
    LOCK_CHECK_FILE,
    LOCK_CHECK_TARGET,
    LOCK_FILE,
    LOCK_TARGET,
    REQUIREMENTS_FILE,
    REQUIREMENTS_TARGET,
    TRUSTED_CA,
    WHEELS_DIR,
    WHEELS_TARGET,
    Fetch,
    Step,
    fetch_settings,
    python_steps,
    system_steps,
    venv_layers,
)
from builder.model import dump
from builder.payload import payload_text
from builder.spec.loader import read_requirements

if TYPE_CHECKING:
    from builder.platforms.base import ResolvedImage
    from builder.resolved import Resolved
    from builder.spec.loader import Stack


@dataclass(frozen=True)
class Recipe:
    """Everything both renderers need; no format-specific decisions inside."""

    name: str
    source: str
    base: str
    system: tuple[Step, ...]
    python: tuple[Step, ...]
    cleanup: tuple[str, ...]
    layers: tuple[str, ...]
    fetch: Fetch | None
    files: tuple[ContextFile, ...]
    rootfs: bool
    env: tuple[tuple[str, str], ...]
    path_prefix: str
    """Put in front of the base image's own PATH (CUDA and Habana bases extend it)."""
    labels: tuple[tuple[str, str], ...]
    workdir: str
    ports: tuple[int, ...]
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    help: tuple[str, ...]
    test: tuple[str, ...]


def image_recipe(decided: Resolved) -> Recipe:
    """Decide the whole image of a resolved stack (reads only the requirements file)."""
    stack, inputs, resolved = decided.stack, decided.inputs, decided.image
    image = stack.spec.image
    requirements = _requirements_text(stack)
    files = list(rootfs_files(stack.spec))
    if requirements is not None:
        files.append(ContextFile(REQUIREMENTS_FILE, REQUIREMENTS_TARGET, 0o644, requirements))
    if inputs.ca_pem is not None:
        files.append(ContextFile(CA_FILE, CA_TARGET, 0o644, inputs.ca_pem))
        if inputs.trust_ca:
            files.append(ContextFile(CA_FILE, TRUSTED_CA, 0o644, inputs.ca_pem))
    files += [
        ContextFile(
            f"{WHEELS_DIR}/{w.filename}", f"{WHEELS_TARGET}/{w.filename}", 0o644, "", w.path
        )
        for w in inputs.wheels
    ]
    ssh = image.ssh.enabled
    env = {"VIRTUAL_ENV": VENV, "PYTHONUNBUFFERED": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    if inputs.lock is not None:
        files.append(ContextFile(LOCK_FILE, LOCK_TARGET, 0o644, inputs.lock.constraints()))
        check = payload_text("lock_check.py")
        files.append(ContextFile(LOCK_CHECK_FILE, LOCK_CHECK_TARGET, 0o644, check))
    if resolved.deepspeed_ops:
        check = payload_text("ds_ops_check.py")
        files.append(ContextFile(DS_OPS_CHECK_FILE, DS_OPS_CHECK_TARGET, 0o644, check))
    staged = (
        requirements is not None
        or inputs.wheels
        or inputs.lock is not None
        or bool(resolved.deepspeed_ops)
    )
    cleanup = [f"rm -rf {BUILD_DIR}"] if staged else []
    cleanup += [f"rm -f {CA_TARGET}"] if inputs.ca_pem is not None else []
    return Recipe(
        name=stack.spec.name,
        source=stack.source,
        base=inputs.lock.base.digest
        if inputs.lock is not None and inputs.lock.base.digest
        else resolved.base,
        system=tuple(system_steps(decided)),
        python=tuple(python_steps(image, resolved, inputs, requirements=requirements is not None)),
        cleanup=tuple(cleanup),
        layers=venv_layers(resolved),
        fetch=fetch_settings(inputs),
        files=tuple(files),
        rootfs=any(f.path.startswith(f"{ROOTFS}/") for f in files),
        env=tuple(sorted({**env, **resolved.env}.items())),
        path_prefix=":".join(f"{layer}/bin" for layer in reversed(venv_layers(resolved))),
        labels=tuple(sorted(_labels(stack, resolved, requirements).items())),
        workdir=image.workdir,
        ports=(image.ssh.port,) if ssh else (),
        entrypoint=("/usr/local/bin/builder-entrypoint",) if _needs_entrypoint(stack) else (),
        cmd=("/usr/sbin/sshd", "-D", "-e") if ssh else ("/bin/bash",),
        help=_help_text(stack, resolved),
        test=_smoke_test(stack, resolved),
    )


ADDED_AFTER_FORMAT_1 = (
    ("fabric", "none"),
    ("deepspeed_ops", None),
    ("archs", None),
    ("platforms", None),
)
"""Image keys newer than format 1, hashed only when set to something else than their
default: a spec that does not use them keeps its hash (and its lock)."""


def spec_hash(stack: Stack, requirements: str | None = None) -> str:
    """sha256 over the image section and the requirements it installs.

    The launch section is left out on purpose: a new node list must not look
    like a new image. Build inputs (CA, indexes, wheelhouse) are left out too:
    they change how packages are fetched, not which.
    """
    text = requirements if requirements is not None else _requirements_text(stack)
    payload = json.dumps(
        {"image": _hashed_image(stack), "requirements": text},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _hashed_image(stack: Stack) -> dict[str, Any]:
    """The image section as hashed: the platforms' keys that format 1 always held are in
    even when unset, so an unchanged spec keeps its hash (and its lock) with a new builder."""
    data: dict[str, Any] = dump(stack.spec.image)
    for platform in platforms.every():
        for key in platform.hashed_when_unset:
            data.setdefault(key, None)
    for key, default in ADDED_AFTER_FORMAT_1:
        if data.get(key) == default:
            del data[key]
    return data


def _requirements_text(stack: Stack) -> str | None:
    rel = stack.spec.image.requirements
    if rel is None:
        return None
    if stack.root is None:
        raise UsageError(
            f"image.requirements: {rel!r} is relative to a spec file, but this stack "
            "is a preset; write it out with `builder init` and load that file"
        )
    try:
        return read_requirements(stack.root, rel)
    except ValueError as exc:
        raise UsageError(f"image.requirements: {exc}") from None


def _needs_entrypoint(stack: Stack) -> bool:
    return stack.spec.image.ssh.enabled or stack.spec.image.user.name != "root"


def _labels(stack: Stack, resolved: ResolvedImage, requirements: str | None) -> dict[str, str]:
    spec = stack.spec
    labels = {
        "org.opencontainers.image.title": spec.name,
        "org.opencontainers.image.version": spec.image.tag,
        BASE_NAME_LABEL: resolved.base,
        SPEC_HASH_LABEL: spec_hash(stack, requirements),
        ACCELERATOR_LABEL: resolved.accelerator,
    }
    if spec.description:
        labels["org.opencontainers.image.description"] = spec.description
    if stack.preset:
        labels[PRESET_LABEL] = stack.preset
    if spec.image.ssh.enabled:
        labels[SSH_PORT_LABEL] = str(spec.image.ssh.port)
    if resolved.deepspeed_ops:
        labels[DEEPSPEED_OPS_LABEL] = ",".join(resolved.deepspeed_ops)
    if resolved.archs:
        labels[ARCHS_LABEL] = ";".join(resolved.archs)
    labels.update(spec.image.labels)
    return labels


def _help_text(stack: Stack, resolved: ResolvedImage) -> tuple[str, ...]:
    spec = stack.spec
    lines = [spec.name + (f": {spec.description}" if spec.description else "")]
    lines.append(f"accelerator: {resolved.accelerator}; base: {resolved.base}")
    if resolved.torch:
        lines.append(f"torch: {resolved.torch}")
    if resolved.deepspeed:
        ops = ", ".join(resolved.deepspeed_ops) or "none (compiled at first use)"
        archs = f" for {', '.join(resolved.archs)}" if resolved.archs else ""
        lines.append(f"DeepSpeed: {resolved.deepspeed}; ops compiled in: {ops}{archs}")
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

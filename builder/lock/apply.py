"""Applying a lock: the lock beside a spec, checked against it and the engine, held by
the build inputs (``image.steps`` installs exactly its packages)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from builder.errors import NotInEngine, UsageError
from builder.image.recipe import spec_hash
from builder.lock.file import Lock, lock_path, read_lock_beside

if TYPE_CHECKING:
    from pathlib import Path

    from builder.engine.base import Engine
    from builder.image.inputs import BuildInputs
    from builder.spec.loader import Stack


def check_lock(lock: Lock, spec_hash: str, source: str) -> None:
    """The lock belongs to this exact spec (image section, requirements, base)."""
    if lock.spec_hash != spec_hash:
        raise UsageError(
            f"the lock of {source} was written for another version of the stack (spec hash "
            f"{lock.spec_hash[:12]}, the stack is now {spec_hash[:12]}): build without it "
            "(--no-lock), then `builder lock` again"
        )


def check_base(lock: Lock, engine: Engine) -> None:
    """Without a registry digest, the local base must still be the locked image."""
    if lock.base.digest:
        return
    if not engine.exists(lock.base.reference):
        raise NotInEngine(
            f"the locked base image {lock.base.reference} is not in the engine",
            image=lock.base.reference,
        )
    now = engine.image(lock.base.reference).id
    if now != lock.base.id:
        raise UsageError(
            f"the base image {lock.base.reference} is now {now[:19]}, but the lock has "
            f"{lock.base.id[:19]}; restore that image, or build with --no-lock and lock again"
        )


def with_lock(
    stack: Stack, inputs: BuildInputs, spec_path: Path | None, engine: Engine | None
) -> BuildInputs:
    """inputs holding the spec's lock (stack.lock beside stack.yaml), checked against the
    stack (its --base-image already applied); unchanged when there is none. Without an
    engine (rendering), the base image is not checked."""
    lock = read_lock_beside(spec_path) if spec_path is not None else None
    if spec_path is None or lock is None:
        return inputs
    check_lock(lock, spec_hash(stack), str(lock_path(spec_path)))
    if engine is not None:
        check_base(lock, engine)
    return replace(inputs, lock=lock)

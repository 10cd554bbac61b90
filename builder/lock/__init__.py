"""Locks: the file format (``file``, pure), taking one from a built image (``take``) and
applying it to a build once (``apply``)."""

from __future__ import annotations

from builder.lock.apply import check_base, check_lock, with_lock
from builder.lock.file import Base, Lock, lock_path, read_lock
from builder.lock.take import take_lock

__all__ = [
    "Base",
    "Lock",
    "check_base",
    "check_lock",
    "lock_path",
    "read_lock",
    "take_lock",
    "with_lock",
]

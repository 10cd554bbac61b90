"""Reading the files a user hands builder, the one way every reader uses.

A spec, its requirements file, the lock and the push record beside it, a CA
bundle, the keys kept in a cluster folder, an ssh config or a script named by an
option: whatever is at the path must be a regular file (a symlink to one is
fine) of at most the caller's limit. A folder, a symlink loop or a link to
nothing, a FIFO (whose read waits forever), a device (/dev/zero never ends) or
an oversized file is refused, naming the file and what is wrong with it, before
a byte is read. Nothing at the path is the caller's to judge (``None``): a
missing lock is no lock, a missing spec is an error.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import TYPE_CHECKING

from builder.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

KIB = 1024
MIB = 1024 * KIB


def size_text(limit: int) -> str:
    """A limit as a message says it: 4 MiB, 64 KiB, 100 bytes."""
    if limit >= MIB and limit % MIB == 0:
        return f"{limit // MIB} MiB"
    if limit >= KIB and limit % KIB == 0:
        return f"{limit // KIB} KiB"
    return f"{limit} bytes"


def file_status(path: Path, *, limit: int | None = None) -> os.stat_result | None:
    """What is at path, followed through symlinks: None when nothing is (no file, no
    link); a ValueError saying what is wrong when it is not a regular file of at most
    limit bytes."""
    try:
        info = path.stat()
    except FileNotFoundError:
        if os.path.lexists(path):
            raise ValueError(
                f"{named(path)} is a symlink to nothing (it points to {str(path.readlink())!r})"
            ) from None
        return None
    except OSError as exc:
        raise ValueError(_unreadable(path, exc)) from None
    _check_kind(path, info, limit)
    return info


def read_bytes(path: Path, *, limit: int) -> bytes | None:
    """The bytes of the regular file at path (at most limit), None when nothing is there;
    a ValueError says what is wrong with anything else (see ``file_status``)."""
    if file_status(path, limit=limit) is None:
        return None
    try:
        # O_NONBLOCK: a FIFO put there since the stat must not block the open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(_unreadable(path, exc)) from None
    with os.fdopen(fd, "rb") as handle:
        _check_kind(path, os.fstat(handle.fileno()), limit)
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise ValueError(_unreadable(path, exc)) from None
    if len(data) > limit:  # grown since the stat, or a file whose size says nothing
        raise ValueError(_too_large(path, limit))
    return data


def read_input(
    path: Path, *, what: str, limit: int, fix: str, field: str | None = None
) -> bytes | None:
    """read_bytes for a file a user gave or left beside the spec: anything wrong with it
    is a UsageError (exit 2) saying what (``the lock``), the problem and the fix."""
    try:
        return read_bytes(path, limit=limit)
    except ValueError as exc:
        raise UsageError(f"{what} {exc}; {fix}", field=field, path=path) from None


def check_input(
    path: Path, *, what: str, fix: str, field: str | None = None, limit: int | None = None
) -> bool:
    """Whether a regular file is at path (False: nothing is), for a file another program
    reads (ssh's config, a script a container runs) or builder replaces; anything else
    there is a UsageError as read_input's."""
    try:
        return file_status(path, limit=limit) is not None
    except ValueError as exc:
        raise UsageError(f"{what} {exc}; {fix}", field=field, path=path) from None


def named(path: Path) -> str:
    """A path as a message shows it: as it is, or quoted where it holds a line break or
    another control character."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def _check_kind(path: Path, info: os.stat_result, limit: int | None) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise ValueError(f"{named(path)} is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{named(path)} is not a regular file (a FIFO, a socket or a device)")
    if limit is not None and info.st_size > limit:
        raise ValueError(_too_large(path, limit))


def _too_large(path: Path, limit: int) -> str:
    return f"{named(path)} is larger than {size_text(limit)}"


def _unreadable(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return f"{named(path)} is a symlink loop (a link that leads back to itself)"
    if exc.errno == errno.ENAMETOOLONG:
        return f"{named(path)[:60]}... is a path too long to open"
    return f"{named(path)} cannot be read ({exc.strerror or exc})"

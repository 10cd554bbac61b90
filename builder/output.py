"""Writing files for the user: all or nothing, atomic, never clobbering.

Every target is checked before the first byte is written, so a refusal
leaves the folder as it was; each file goes to a temporary name in the same
folder and is renamed into place.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from builder.errors import OutputExists, UsageError

if TYPE_CHECKING:
    from collections.abc import Iterable


@dataclass(frozen=True)
class OutputFile:
    """One file to write: its path relative to the output folder, mode and text, or, for a
    large binary input (a wheel), the file to copy."""

    path: str
    mode: int
    text: str
    source: Path | None = None


def write_files(files: Iterable[OutputFile], directory: Path, *, force: bool) -> list[Path]:
    """Write files under directory; refuse (writing nothing) if one differs and not force."""
    planned = [(directory / f.path, f) for f in files]
    for path, _ in planned:
        if not path.resolve().is_relative_to(directory.resolve()):
            raise UsageError(f"refusing to write {path}: it is outside {directory}")
    clashes = [str(path) for path, f in planned if path.exists() and not _same(path, f)]
    if clashes and not force:
        shown = ", ".join(clashes[:5]) + (
            f" and {len(clashes) - 5} more" if len(clashes) > 5 else ""
        )
        raise OutputExists(
            f"{shown} already exist{'s' if len(clashes) == 1 else ''} with other content; "
            "nothing was written. Pass --force to replace, or choose another -o folder."
        )
    written = []
    for path, f in planned:
        if f.source is not None:
            _copy(f.source, path, f.mode)
        else:
            write_text(path, f.text, f.mode)
        written.append(path)
    return written


def _same(path: Path, f: OutputFile) -> bool:
    if not path.is_file():
        return False
    if f.source is not None:
        return filecmp.cmp(path, f.source, shallow=False)
    return path.read_text(errors="replace") == f.text


def _copy(source: Path, path: Path, mode: int) -> None:
    """Copy a large input (a wheel) next to the others, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str, mode: int = 0o644) -> None:
    """Atomically replace path with text (temp file in the same folder, then rename)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

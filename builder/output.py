"""Writing files for the user: all or nothing, atomic, never clobbering.

``write_files`` works in two steps. First every target is checked (a parent
that is a file, a target that is a folder, a symlink leading out of the
output folder, a file with other content) and a refusal leaves the disk as it
was. Then each file is written to a temporary name in its folder and, once
all of them are written, renamed into place. Folders that already exist keep
their mode and owner; only folders made here get ``folder_mode``.
"""

from __future__ import annotations

import contextlib
import errno
import filecmp
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from builder.errors import OutputExists, UsageError
from builder.files import named

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


@dataclass(frozen=True)
class _Target:
    path: Path
    file: OutputFile


def write_files(
    files: Iterable[OutputFile], directory: Path, *, force: bool, private: bool = False
) -> list[Path]:
    """Write files under directory; refuse (writing nothing) if one differs and not force.

    A target that is a folder, or a path through a file, is refused even with force.
    private (keys): folders made here are 0700, and an existing directory that
    group or others may enter is refused rather than changed.
    """
    folder_mode = 0o700 if private else 0o755
    try:
        if private:
            check_private(directory)
        targets = _prepare(list(files), directory, force=force)
    except OSError as exc:  # a folder on the way that cannot be read
        raise UsageError(
            f"cannot check {exc.filename or directory}: {exc.strerror or exc}; nothing was written",
            path=_failed_path(exc, directory),
        ) from None
    made: list[Path] = []
    staged: list[tuple[Path, Path]] = []
    try:
        for target in targets:
            made += _make_folders(target.path.parent, folder_mode)
            staged.append((_stage(target), target.path))
        for tmp, path in staged:
            tmp.replace(path)
    except BaseException as exc:  # Ctrl-C too: no hidden .*.tmp file is left behind
        _undo(staged, made)
        if not isinstance(exc, OSError):
            raise
        raise UsageError(
            f"cannot write into {directory}: {exc.strerror or exc}"
            f"{f' ({exc.filename})' if exc.filename else ''}; nothing was written",
            path=_failed_path(exc, directory),
        ) from None
    return [target.path for target in targets]


def _undo(staged: list[tuple[Path, Path]], made: list[Path]) -> None:
    """Remove the temporary files and the folders made for them (those still empty)."""
    for tmp, _ in staged:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    for folder in reversed(made):
        with contextlib.suppress(OSError):  # not empty: something else wrote there
            folder.rmdir()


def _prepare(files: list[OutputFile], directory: Path, *, force: bool) -> list[_Target]:
    """Every check before the first byte is written."""
    _check_folder(directory, directory)
    root = resolved_path(directory)
    other = "another -o file" if len(files) == 1 else "another -o folder"
    targets: list[_Target] = []
    seen: set[str] = set()
    for f in files:
        relative = PurePosixPath(f.path)
        if relative.is_absolute() or ".." in relative.parts or not relative.parts:
            raise UsageError(
                f"refusing to write {f.path!r}: not a path inside {directory}", path=f.path
            )
        if f.path in seen:
            raise UsageError(f"{f.path} is written twice; this is a bug in builder", path=f.path)
        seen.add(f.path)
        path = directory.joinpath(*relative.parts)
        _check_folder(path.parent, directory)
        if path.is_symlink() and not resolved_path(path).is_relative_to(root):
            raise UsageError(
                f"refusing to write {path}: it is a symlink to {resolved_path(path)}, outside "
                f"{directory}; remove the link or choose another -o folder",
                path=path,
            )
        if not resolved_path(path).is_relative_to(root):
            raise UsageError(f"refusing to write {path}: it is outside {directory}", path=path)
        if path.is_dir():
            raise UsageError(
                f"{path} is a folder, where builder writes a file; nothing was written. "
                f"Move it away or choose {other} (--force replaces files, never folders).",
                path=path,
            )
        targets.append(_Target(path, f))
    clashes = [str(t.path) for t in targets if t.path.exists() and not _same(t.path, t.file)]
    if clashes and not force:
        shown = ", ".join(clashes[:5]) + (
            f" and {len(clashes) - 5} more" if len(clashes) > 5 else ""
        )
        raise OutputExists(
            f"{shown} already exist{'s' if len(clashes) == 1 else ''} with other content; "
            f"nothing was written. Pass --force to replace, or choose {other}.",
            paths=clashes,
        )
    return targets


def check_private(directory: Path) -> None:
    """Refuse an existing directory that group or others may enter (never chmod it)."""
    if directory.is_dir() and directory.stat().st_mode & 0o077:
        mode = directory.stat().st_mode & 0o7777
        raise UsageError(
            f"{directory} is open to other users (mode {mode:04o}) and would hold the "
            f"cluster's private keys; nothing was written and its mode is left as it is. "
            f"Run `chmod 700 {directory}` if it is yours alone, or choose another -o folder.",
            path=directory,
        )


def _check_folder(folder: Path, directory: Path) -> None:
    """folder and each of its parents is a folder or missing; inside directory, a
    symlinked folder must stay inside it."""
    root = resolved_path(directory)
    for part in [folder, *folder.parents]:
        if part.exists() and not part.is_dir():
            raise UsageError(
                f"{part} is a file, where builder needs a folder for {directory}; "
                "nothing was written. Move it away or choose another -o folder.",
                path=part,
            )
        inside = part != directory and part.is_relative_to(directory)
        if inside and part.is_symlink() and not resolved_path(part).is_relative_to(root):
            raise UsageError(
                f"refusing to write through {part}: it is a symlink to {resolved_path(part)}, "
                f"outside {directory}; remove the link or choose another -o folder",
                path=part,
            )


def _make_folders(folder: Path, mode: int) -> list[Path]:
    """Make folder and missing parents with mode; return those made, outermost first."""
    missing = [p for p in [folder, *folder.parents] if not p.exists()]
    made = []
    for part in reversed(missing):
        part.mkdir(mode=mode)
        part.chmod(mode)  # mkdir's mode passes through the umask; ours is what was asked
        made.append(part)
    return made


def _stage(target: _Target) -> Path:
    """The file's content at a temporary name beside its target, with its mode."""
    path, f = target.path, target.file
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(name)
    try:
        if f.source is not None:
            os.close(fd)
            shutil.copyfile(f.source, tmp)
        else:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(f.text)
        tmp.chmod(f.mode)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _same(path: Path, f: OutputFile) -> bool:
    if not path.is_file():
        return False
    try:
        if f.source is not None:
            return filecmp.cmp(path, f.source, shallow=False)
        return path.read_text(errors="replace") == f.text
    except OSError:  # unreadable: not known to be the same, so a clash
        return False


def resolved_path(path: Path) -> Path:
    """path with its symlinks followed; a loop on the way is a UsageError naming it.

    Strict first: from Python 3.13 a loop no longer makes the lenient resolve() fail, so
    only the strict one sees it; a part that does not exist yet (the folder to make) ends
    the strict walk, and the lenient resolve() then follows what exists."""
    try:
        try:
            return path.resolve(strict=True)
        except FileNotFoundError:
            return path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        loop = isinstance(exc, RuntimeError) or exc.errno == errno.ELOOP
        why = "a symlink on the way leads back to itself" if loop else str(exc)
        raise UsageError(
            f"cannot follow {named(path)}: {why}; remove or fix the link, or choose another folder",
            path=path,
        ) from None


def _failed_path(exc: OSError, directory: Path) -> Path:
    """The path an OSError names, or directory when it names none."""
    return Path(exc.filename) if isinstance(exc.filename, str) else directory


def write_text(path: Path, text: str, mode: int = 0o644) -> None:
    """Atomically replace path with text (temp file in the same folder, then rename)."""
    write_files([OutputFile(path.name, mode, text)], path.parent, force=True)

"""The cluster folder: how every command that writes into it does, and what builder wrote.

Whichever command makes the folder first (``hostfile -o``, ``dsenv -o``, ``keys``,
``bundle``, ``slurm -o``) makes it 0700: it holds, or will hold, the cluster's
private keys, and ``keys`` and ``bundle`` refuse a folder other users may enter.
A folder that already exists keeps its mode: a command that writes no secret
writes into it as it is, and ``keys`` and ``bundle`` refuse it when it is open
(never chmod a user's folder).

``RunFolder`` is the folder twice: where builder reads and writes it here, and the
path the nodes see it at (``--node-dir``; recorded in ``RECORD``, so that every later
command reading the folder uses the same path; by default this machine's own, the
folder on shared storage).

``RECORD`` lists what builder wrote there (the sha256 of each file, and the stack
it was written for): a later bundle of the same stack rewrites a file that is
still as builder wrote it (the spec or the options changed) without ``--force``,
and refuses one that holds anything else (a hand edit, a file of another stack or
of another tool), naming it and the fix. A file with exactly the content the
bundle would write is never a clash.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from builder.errors import OutputExists, UsageError, shown
from builder.files import MIB, read_bytes
from builder.launch.actions import bind_problem, normal_path
from builder.output import OutputFile, check_private, write_files

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

RECORD = ".builder-written.json"
"""What builder wrote in the folder: {"files": {path: {"sha256", "stack"}}, "nodes":
the path the nodes see the folder at}."""
_MAX_RECORD_BYTES = MIB
NODE_DIR = "--node-dir"
"""The option naming the path the nodes see the folder at."""


@dataclass(frozen=True)
class RunFolder:
    """A run's folder: here, where builder reads and writes it on this machine (as the
    command was given it); nodes, the absolute path every node sees it at, which every
    command, plan and file the nodes read names."""

    here: Path
    nodes: str
    named: bool = False
    """nodes was named: given (--node-dir), or recorded by an earlier bundle that was;
    only a named path is recorded (a folder moved here keeps no stale one)."""

    @property
    def option(self) -> str:
        """The option a refusal of the nodes' path names: --node-dir when it was named
        (given, or recorded from a bundle given it), else --cluster-dir."""
        return NODE_DIR if self.named else "--cluster-dir"

    @property
    def elsewhere(self) -> bool:
        """The nodes see the folder at another path than this machine does."""
        return self.nodes != str(self.here.resolve())

    def note(self, option: str) -> str | None:
        """What a command says when the path the nodes see was not given: this machine's
        absolute path of a relative folder (None when given, recorded or absolute)."""
        if self.named or self.here.is_absolute():
            return None
        return (
            f"the nodes' commands name {self.nodes}, this machine's path of {option} "
            f"{self.here}; if the nodes see the folder elsewhere, give that path with "
            f"{NODE_DIR} PATH"
        )


def run_folder(here: Path, nodes: str | None = None) -> RunFolder:
    """here with the path its nodes see it at: nodes (--node-dir, checked as one side
    of a bind), else the one an earlier bundle recorded there, else this machine's."""
    if nodes is not None:
        why = bind_problem(nodes)
        if why:
            raise UsageError(
                f"{NODE_DIR} {shown(nodes)}: {why}. It is where every node sees the run's "
                "folder (mounted into the containers), e.g. /shared/runs/cluster",
                field=NODE_DIR,
                value=nodes,
            )
        return RunFolder(here, normal_path(nodes), named=True)
    recorded = _recorded_nodes(here)
    if recorded is not None:
        return RunFolder(here, recorded, named=True)
    return RunFolder(here, str(here.resolve()))


def _recorded_nodes(directory: Path) -> str | None:
    """The nodes' path an earlier bundle recorded in directory, if one did and it is
    still a path the nodes can be given."""
    nodes = _read_record_data(directory).get("nodes")
    if isinstance(nodes, str) and bind_problem(nodes) is None:
        return normal_path(nodes)
    return None


def write_cluster_files(
    files: Iterable[OutputFile],
    directory: Path,
    *,
    force: bool,
    secret: bool = False,
    recorded: Iterable[str] = (),
    stack: str | None = None,
    nodes: str | None = None,
) -> list[Path]:
    """Write files into a cluster folder (all or nothing): folders made here are 0700.

    secret (keys, a bundle): an existing folder that others may enter is refused
    (``output.check_private``). recorded: the files to note in ``RECORD`` as written by
    builder for stack (for any stack when None), so that a later bundle of it may
    replace them: those made from the spec alone (a .deepspeed_env with `--set`
    values is not: a bundle without them must not drop them silently). nodes: the path
    the nodes see the folder at, recorded with them (``RunFolder``).
    """
    files = list(files)
    if secret:
        check_private(directory)
    # private=True makes missing folders 0700; for a folder that exists already it
    # would also refuse an open one, which only secrets call for
    private = secret or not directory.exists()
    recorded = set(recorded)
    if recorded:
        written = [f for f in files if f.path in recorded]
        files.append(_record_file(directory, written, stack, nodes))
    return [
        path
        for path in write_files(files, directory, force=force, private=private)
        if path.name != RECORD
    ]


def check_rewrite(files: Iterable[OutputFile], directory: Path, *, stack: str) -> None:
    """Refuse (OutputExists, nothing written) when a file would replace content that is
    neither what it would write nor what builder wrote there for stack."""
    record = _read_record(directory)
    clashes = []
    for f in files:
        path = directory / f.path
        if not os.path.lexists(path) or path.is_dir():
            continue  # nothing to replace, or a folder: write_files refuses it, even forced
        current = _current(path)
        if current is not None and current == f.text.encode():
            continue
        entry = record.get(f.path, {})
        builders = current is not None and entry.get("sha256") == _digest(current)
        if builders and entry.get("stack") in (None, stack):
            continue
        clashes.append(str(path))
    if clashes:
        shown = ", ".join(clashes[:5]) + (
            f" and {len(clashes) - 5} more" if len(clashes) > 5 else ""
        )
        raise OutputExists(
            f"{shown} already exist{'s' if len(clashes) == 1 else ''} with other content, not "
            f"written by builder for stack {stack} (edited since, or from other options: "
            "a command's --set values are the run's: give them again, or put them in "
            "launch.env; a `hostfile --nodes` list goes to launch.nodes); nothing was "
            "written. Pass --force to replace, or choose another --cluster-dir.",
            paths=clashes,
        )


def _record_file(
    directory: Path, files: list[OutputFile], stack: str | None, nodes: str | None
) -> OutputFile:
    """The record after files are written: theirs, and the earlier entries of files still
    as builder wrote them."""
    kept = {}
    for path, entry in _read_record(directory).items():
        current = _current(directory / path)
        if current is not None and entry.get("sha256") == _digest(current):
            kept[path] = entry
    for f in files:
        if f.source is None:
            kept[f.path] = {"sha256": _digest(f.text.encode()), "stack": stack}
    data: dict[str, Any] = {"files": dict(sorted(kept.items()))}
    nodes = nodes if nodes is not None else _recorded_nodes(directory)
    if nodes is not None:  # kept when a command that names none writes here (keys)
        data["nodes"] = nodes
    return OutputFile(RECORD, 0o600, json.dumps(data, indent=2, sort_keys=True) + "\n")


def _read_record(directory: Path) -> dict[str, dict[str, Any]]:
    """The record's entries; an unreadable or malformed record is no record (the files
    it named then count as another tool's)."""
    files = _read_record_data(directory).get("files")
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, dict)}


def _read_record_data(directory: Path) -> dict[str, Any]:
    """The record as a JSON object; {} for none, or for one that is not an object."""
    try:
        data = json.loads(_current(directory / RECORD, limit=_MAX_RECORD_BYTES) or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _current(path: Path, *, limit: int = 16 * MIB) -> bytes | None:
    """The bytes of the regular file at path; None for nothing there, or for what cannot
    be read as one (a FIFO, a link to nothing, an unreadable file: not known to be
    builder's, so a clash)."""
    try:
        return read_bytes(path, limit=limit)
    except (ValueError, OSError):
        return None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_cluster_file(path: Path, text: str, *, force: bool) -> list[Path]:
    """One file a command writes by itself (`hostfile -o`, `dsenv -o`, `slurm -o`),
    maybe into the cluster folder: a folder made for it is 0700, as every cluster
    folder builder makes; an existing one is written into as it is."""
    return write_cluster_files([OutputFile(path.name, 0o644, text)], path.parent, force=force)

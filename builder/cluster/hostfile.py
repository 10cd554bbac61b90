"""Hostfiles for DeepSpeed, gaudi_spawn and mpirun: ``host slots=N``, one per line.

DeepSpeed's parser (``deepspeed.launcher.runner._parse_hostfile``) skips blank
and ``#`` lines and rejects duplicates; optimum-habana's is stricter and
fails on comments, so we write none. Line order is node-rank order. A
hostfile path that does not exist is an error here: DeepSpeed's launcher
would only warn and quietly run on the local node alone.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.cluster.nodelist import expand_nodelist, host_name_problem
from builder.errors import UsageError, shown
from builder.files import MIB, read_input

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from pathlib import Path

    from builder.spec.records import LaunchSpec

MAX_SLOTS = 1024
_TASKS = re.compile(r"([0-9]{1,4})(\(x[0-9]{1,6}\))?")
_COUNT = re.compile(r"[0-9]{1,4}")
_LINE = re.compile(r"(\S+)\s+slots=([0-9]{1,4})")


@dataclass(frozen=True)
class Host:
    """One node and how many processes (accelerators) it runs."""

    name: str
    slots: int


def hosts_from_nodes(nodes: Iterable[str], slots: int) -> list[Host]:
    """Hosts from names or Slurm node lists; duplicates and bad slot counts are errors."""
    if not 1 <= slots <= MAX_SLOTS:
        raise UsageError(
            f"slots must be between 1 and {MAX_SLOTS} per node, not {slots}", value=slots
        )
    names = [name for entry in nodes for name in expand_nodelist(entry)]
    if not names:
        raise UsageError("no nodes given: name at least one host or node list")
    twice = sorted(name for name, count in Counter(names).items() if count > 1)
    if twice:
        raise UsageError(
            f"{', '.join(twice)} listed more than once; DeepSpeed refuses a hostfile with "
            "duplicate hosts (give each node once, with its slots)",
            value=tuple(twice),
        )
    return [Host(name, slots) for name in names]


def run_hosts(launch: LaunchSpec) -> list[Host]:
    """The run's hosts in node-rank order, each with its own slots (launch.node_slots)."""
    return [
        Host(h.name, launch.slots_of(h.name)) for h in hosts_from_nodes(launch.nodes, launch.slots)
    ]


def hosts_from_slurm(env: Mapping[str, str], slots: int | None = None) -> list[Host]:
    """Hosts of the Slurm job this runs in, from SLURM_JOB_NODELIST and the job's shape."""
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise UsageError(
            "SLURM_JOB_NODELIST is not set: run this inside a Slurm job (salloc, sbatch) "
            "or give --nodes",
            field="SLURM_JOB_NODELIST",
        )
    return hosts_from_nodes([nodelist], slots if slots is not None else _slurm_slots(env))


def _slurm_slots(env: Mapping[str, str]) -> int:
    for name in ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE", "SLURM_NTASKS_PER_NODE"):
        value = env.get(name, "").split(":")[-1]  # SLURM_GPUS_PER_NODE may be "a100:4"
        if _COUNT.fullmatch(value) and int(value) > 0:
            return int(value)
    match = _TASKS.fullmatch(env.get("SLURM_TASKS_PER_NODE", ""))
    if match:
        return int(match[1])
    raise UsageError(
        "cannot tell the slots per node from the Slurm job (no usable SLURM_GPUS_ON_NODE, "
        "SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE): pass --slots N",
        field="--slots",
    )


def hostfile_text(hosts: Iterable[Host]) -> str:
    """The hostfile: ``name slots=N`` lines in node-rank order, nothing else."""
    return "".join(f"{host.name} slots={host.slots}\n" for host in hosts)


MAX_HOSTFILE_BYTES = 16 * MIB
"""Far more than the most hosts a hostfile may list take."""


def require_hostfile(path: Path) -> None:
    """Fail clearly where DeepSpeed would silently fall back to one node."""
    if not path.is_file():
        raise UsageError(
            f"hostfile {path} does not exist; DeepSpeed would quietly run on this node "
            "only. Write it with `builder hostfile ... -o PATH`",
            path=path,
        )


def read_hostfile(path: Path) -> list[Host]:
    """The hosts of a hostfile, read as DeepSpeed reads it (blank and # lines skipped);
    a missing file, a bad line or a duplicate host is an error naming the line."""
    raw_bytes = read_input(
        path, what="the hostfile", limit=MAX_HOSTFILE_BYTES, fix="write it with `builder hostfile`"
    )
    if raw_bytes is None:
        require_hostfile(path)
        raise AssertionError  # require_hostfile refused it
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        number = raw_bytes[: exc.start].count(b"\n") + 1
        raise UsageError(
            f"{path}:{number}: not UTF-8 text; save the hostfile as UTF-8", path=path
        ) from None
    hosts: list[Host] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.split("#", 1)[0].strip(" \t\r")
        if not line:
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            raise UsageError(
                f"{path}:{number}: {shown(raw)} is not `host slots=N`", path=path, value=raw
            )
        problem = host_name_problem(match[1])
        if problem:
            raise UsageError(f"{path}:{number}: {problem}", path=path, value=match[1])
        if not 1 <= int(match[2]) <= MAX_SLOTS:
            raise UsageError(
                f"{path}:{number}: slots must be between 1 and {MAX_SLOTS}",
                path=path,
                value=int(match[2]),
            )
        hosts.append(Host(match[1], int(match[2])))
    if not hosts:
        raise UsageError(f"{path} names no host", path=path)
    twice = sorted(name for name, count in Counter(h.name for h in hosts).items() if count > 1)
    if twice:
        raise UsageError(
            f"{path}: {', '.join(twice)} listed more than once", path=path, value=tuple(twice)
        )
    return hosts


def choose_hosts(
    *,
    spec_nodes: tuple[str, ...] | None,
    spec_slots: int | None,
    nodes: list[str],
    slots: int | None,
    from_slurm: bool,
    env: Mapping[str, str],
    spec_node_slots: Mapping[str, int] | None = None,
) -> list[Host]:
    """The hosts `builder hostfile` writes: --nodes, else the Slurm job, else the spec's
    launch (its nodes of another size too, unless --slots gives every node the same)."""
    if slots is not None and not 1 <= slots <= MAX_SLOTS:
        raise UsageError(
            f"--slots {slots}: give 1 to {MAX_SLOTS} processes per node",
            field="--slots",
            value=slots,
        )
    if from_slurm:
        if nodes:
            raise UsageError(
                "--from-slurm takes the nodes from the Slurm job: drop --nodelist",
                field="--nodelist",
                value=tuple(nodes),
            )
        nodelist = "SLURM_JOB_NODELIST" if env.get("SLURM_JOB_NODELIST") else "SLURM_NODELIST"
        return _named(nodelist, lambda: hosts_from_slurm(env, slots))
    per_node = slots if slots is not None else (spec_slots if spec_slots is not None else 1)
    if nodes:
        return _named("--nodelist", lambda: hosts_from_nodes(nodes, per_node))
    if spec_nodes is None:
        raise UsageError("say which nodes: --nodelist LIST, --from-slurm, or a spec (launch.nodes)")
    own = spec_node_slots if slots is None and spec_node_slots else {}
    hosts = _named("launch.nodes", lambda: hosts_from_nodes(spec_nodes, per_node))
    return [Host(host.name, own.get(host.name, host.slots)) for host in hosts]


def _named(source: str, hosts: Callable[[], list[Host]]) -> list[Host]:
    """hosts(), its error prefixed with where the nodes came from (an option, a variable)."""
    try:
        return hosts()
    except UsageError as exc:
        if str(exc).startswith("cannot tell the slots"):
            raise
        raise UsageError(f"{source}: {exc}", field=source, value=exc.value, path=exc.path) from None

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

from builder.cluster.nodelist import expand_nodelist
from builder.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

MAX_SLOTS = 1024
_TASKS = re.compile(r"^(\d+)(\(x\d+\))?$")


@dataclass(frozen=True)
class Host:
    """One node and how many processes (accelerators) it runs."""

    name: str
    slots: int


def hosts_from_nodes(nodes: Iterable[str], slots: int) -> list[Host]:
    """Hosts from names or Slurm node lists; duplicates and bad slot counts are errors."""
    if not 1 <= slots <= MAX_SLOTS:
        raise UsageError(f"slots must be between 1 and {MAX_SLOTS} per node, not {slots}")
    names = [name for entry in nodes for name in expand_nodelist(entry)]
    if not names:
        raise UsageError("no nodes given: name at least one host or node list")
    twice = sorted(name for name, count in Counter(names).items() if count > 1)
    if twice:
        raise UsageError(
            f"{', '.join(twice)} listed more than once; DeepSpeed refuses a hostfile with "
            "duplicate hosts (give each node once, with its slots)"
        )
    return [Host(name, slots) for name in names]


def hosts_from_slurm(env: Mapping[str, str], slots: int | None = None) -> list[Host]:
    """Hosts of the Slurm job this runs in, from SLURM_JOB_NODELIST and the job's shape."""
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise UsageError(
            "SLURM_JOB_NODELIST is not set: run this inside a Slurm job (salloc, sbatch) "
            "or give --nodes"
        )
    return hosts_from_nodes([nodelist], slots if slots is not None else _slurm_slots(env))


def _slurm_slots(env: Mapping[str, str]) -> int:
    for name in ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE", "SLURM_NTASKS_PER_NODE"):
        value = env.get(name, "").split(":")[-1]  # SLURM_GPUS_PER_NODE may be "a100:4"
        if value.isdigit() and int(value) > 0:
            return int(value)
    match = _TASKS.match(env.get("SLURM_TASKS_PER_NODE", ""))
    if match:
        return int(match[1])
    raise UsageError(
        "cannot tell the slots per node from the Slurm job (no SLURM_GPUS_ON_NODE, "
        "SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE): pass --slots N"
    )


def hostfile_text(hosts: Iterable[Host]) -> str:
    """The hostfile: ``name slots=N`` lines in node-rank order, nothing else."""
    return "".join(f"{host.name} slots={host.slots}\n" for host in hosts)


def require_hostfile(path: Path) -> None:
    """Fail clearly where DeepSpeed would silently fall back to one node."""
    if not path.is_file():
        raise UsageError(
            f"hostfile {path} does not exist; DeepSpeed would quietly run on this node "
            "only. Write it with `builder hostfile ... -o PATH`"
        )


def read_hostfile(path: Path) -> list[Host]:
    """The hosts of a hostfile, read as DeepSpeed reads it (blank and # lines skipped);
    a missing file, a bad line or a duplicate host is an error naming the line."""
    require_hostfile(path)
    hosts: list[Host] = []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"(\S+)\s+slots=(\d+)", line)
        if match is None:
            raise UsageError(f"{path}:{number}: {raw!r} is not `host slots=N`")
        hosts.append(Host(match.group(1), int(match.group(2))))
    if not hosts:
        raise UsageError(f"{path} names no host")
    twice = sorted(name for name, count in Counter(h.name for h in hosts).items() if count > 1)
    if twice:
        raise UsageError(f"{path}: {', '.join(twice)} listed more than once")
    return hosts


def choose_hosts(
    *,
    spec_nodes: tuple[str, ...] | None,
    spec_slots: int | None,
    nodes: list[str],
    slots: int | None,
    from_slurm: bool,
    env: Mapping[str, str],
) -> list[Host]:
    """The hosts `builder hostfile` writes: --nodes, else the Slurm job, else the spec's launch."""
    if from_slurm:
        if nodes:
            raise UsageError("--from-slurm takes the nodes from the Slurm job: drop --nodes")
        return hosts_from_slurm(env, slots)
    per_node = slots if slots is not None else (spec_slots if spec_slots is not None else 1)
    if nodes:
        return hosts_from_nodes(nodes, per_node)
    if spec_nodes is None:
        raise UsageError("say which nodes: --nodes LIST, --from-slurm, or a spec (launch.nodes)")
    return hosts_from_nodes(spec_nodes, per_node)

"""A rehearsal's place on this machine: its nodes, network, bundle folder, the outcome
it is writing, its clock, and its teardown. Strategies (ssh, torchrun, slurm) run
in a session; none reaches into another's state.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.contract import REHEARSAL_LABEL
from builder.errors import NotInEngine
from builder.launch.logs import tail
from builder.preflight.report import probe_reports
from builder.rehearse.report import MARK, Fault, check_reports

if TYPE_CHECKING:
    from collections.abc import Callable

    from builder.engine.base import Engine
    from builder.launch.actions import ContainerStart
    from builder.rehearse.report import Expected, RankRow

START_TIMEOUT = 120.0


@dataclass(frozen=True)
class Node:
    """One rehearsal node: its hostname in the plan and its container's name."""

    name: str
    container: str


@dataclass
class Outcome:
    """What the rehearsal found; ok when there is no fault."""

    launcher: str
    nodes: tuple[str, ...]
    phases: list[tuple[str, float]] = field(default_factory=list)
    rows: list[RankRow] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    kept: str | None = None
    output: str = ""
    """What the ranks printed on stdout (the job's own output; not in ``as_data``)."""
    lines: list[dict[str, object]] = field(default_factory=list)
    """The script's lines, each with its node and rank (where the launcher names them)."""
    events: list[str] = field(default_factory=list)
    """What happened on the way: faults injected, nodes back, restarts."""
    restart_seconds: float | None = None
    """From an injected kill until every rank of the next attempt was running."""

    @property
    def ok(self) -> bool:
        return not self.faults

    def as_data(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "launcher": self.launcher,
            "nodes": list(self.nodes),
            "phases": {name: round(seconds, 2) for name, seconds in self.phases},
            "ranks": [vars(row) for row in self.rows],
            "faults": [vars(fault) for fault in self.faults],
            "kept": self.kept,
            "events": list(self.events),
            "restart_seconds": self.restart_seconds,
            "output": list(self.lines),
        }


class Session:
    """Nodes node1..nodeN (containers named after the session), a private network, a
    folder for the bundle; faults and phase times go to ``outcome``."""

    def __init__(
        self,
        engine: Engine,
        *,
        nodes: int,
        launcher: str,
        timeout: float,
        say: Callable[[str], None],
    ) -> None:
        self.id = f"rehearse-{uuid.uuid4().hex[:8]}"
        self.engine = engine
        self.timeout = timeout
        self.say = say
        self.nodes = tuple(Node(f"node{i}", f"{self.id}-node{i}") for i in range(1, nodes + 1))
        self.network = self.id
        self.folder = Path(tempfile.mkdtemp(prefix=f"builder-{self.id}-"))
        self.outcome = Outcome(launcher, tuple(n.name for n in self.nodes))
        self._clock = time.monotonic()

    @property
    def label(self) -> tuple[str, str]:
        """The label every container of this session carries."""
        return REHEARSAL_LABEL, self.id

    def phase(self, name: str) -> None:
        now = time.monotonic()
        self.outcome.phases.append((name, now - self._clock))
        self.say(f"{name}: {now - self._clock:.1f} s")
        self._clock = now

    def state(self, node: Node) -> str:
        """The node's container state: running, exited, ..., or gone."""
        try:
            return self.engine.container_state(node.container)
        except NotInEngine:
            return "gone"

    def fault(self, node: str | None, what: str, log_tail: str = "") -> None:
        self.outcome.faults.append(Fault(node, what, log_tail))

    def node_fault(self, node: Node, what: str, logs: str | None = None) -> None:
        """A fault on node, with its container's log tail unless logs are given."""
        if logs is None:
            with contextlib.suppress(Exception):
                logs = self.engine.logs(node.container)
        self.fault(node.name, what, tail(logs or ""))

    def start(self, node: Node, action: ContainerStart) -> bool:
        """Run a node's `docker run` with the docker CLI, as a user would; a fault if it fails."""
        code, output = self.engine.cli(action.argv(), START_TIMEOUT)
        if code != 0:
            late = f" within {START_TIMEOUT:.0f} s" if code is None else ""
            self.fault(node.name, f"its container did not start{late}", tail(output))
        return code == 0

    def judge(self, output: str, expected: Expected | None) -> None:
        """The probe's reports in output: the per-rank table, and the faults it shows
        (those already known from the launcher's own output are not said twice)."""
        self.outcome.output = output
        if expected is None:
            return
        rows, faults = check_reports(probe_reports(output, MARK), expected)
        self.outcome.rows = rows
        known = {(f.node, f.what) for f in self.outcome.faults}
        self.outcome.faults += [f for f in faults if (f.node, f.what) not in known]

    def teardown(self, *, keep: bool) -> None:
        """Remove every container and the network (and the bundle), unless keep."""
        if keep:
            self.outcome.kept = str(self.folder)
            key, value = self.label
            self.say(
                f"kept: containers {', '.join(n.container for n in self.nodes)} on network "
                f"{self.network}, bundle {self.folder} (it holds the cluster's private key); "
                f"remove with `docker rm -f $(docker ps -aq --filter label={key}={value})`, "
                f"`docker network rm {self.network}` and `rm -rf {shlex.quote(str(self.folder))}`"
            )
            return
        try:
            self.engine.remove_labelled(*self.label)
            self.engine.remove_network(self.network)
        finally:  # the bundle holds the cluster's private key: it goes whatever happened
            shutil.rmtree(self.folder, ignore_errors=True)
        self.phase("teardown")

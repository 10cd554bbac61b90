"""Faults a rehearsal injects on purpose: a rank or a whole node killed at a moment or
once a line of the script's output appears, and the node brought back.

A rank is killed with SIGKILL inside its node's container (every process whose
environment has its LOCAL_RANK under the launcher), as an out-of-memory kill or
a crash would end it; a node is killed with `docker kill` (SIGKILL to its
container: the machine is gone, its rendezvous keep-alives stop). Brought back,
the node's container starts again from the plan's own `docker run`, as a
repaired node rejoins. What the run does then is the launch policy's
(launch.restarts, launch.min_nodes): the rehearsal reports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.errors import UsageError, shown

if TYPE_CHECKING:
    from builder.rehearse.stream import Line

KILL = re.compile(r"^node(?P<node>[1-9][0-9]*)(?::(?P<rank>[0-9]+))?$")

KILL_RANK = (
    'for p in /proc/[0-9]*; do [ "${{p#/proc/}}" != $$ ] || continue; '
    "tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -qx 'LOCAL_RANK={rank}' "
    "&& tr '\\0' '\\n' < $p/environ | grep -q '^TORCHELASTIC_RESTART_COUNT=' "
    '&& kill -9 "${{p#/proc/}}" 2>/dev/null && echo "${{p#/proc/}}"; done; true'
)
"""Kill (SIGKILL) every process of a local rank, found by its environment: the rank
and its children, not the launcher (which has no LOCAL_RANK)."""


@dataclass(frozen=True)
class Kill:
    """What to kill (node, and a local rank on it or the whole node), when (``at``
    seconds after the nodes started, or once a line holds ``after``), and whether the
    node comes back ``back`` seconds later."""

    node: str
    local_rank: int | None = None
    at: float | None = None
    after: str | None = None
    back: float | None = None

    def target(self) -> str:
        if self.local_rank is None:
            return f"{self.node}'s container"
        return f"{self.node}'s local rank {self.local_rank}"

    def when(self) -> str:
        if self.after is not None:
            return f"once a line held {shown(self.after)}"
        return f"at {self.at:g} s"

    def rank_command(self) -> list[str]:
        assert self.local_rank is not None
        return ["sh", "-c", KILL_RANK.format(rank=self.local_rank)]


def kill_of(
    kill: str | None,
    *,
    at: float | None,
    after: str | None,
    back: float | None,
    nodes: int,
) -> Kill | None:
    """--kill NODE[:LOCAL_RANK] with --kill-at SECONDS or --kill-after TEXT, and --back
    SECONDS, checked against each other and the node count."""
    if kill is None:
        given = [
            name
            for name, value in (("--kill-at", at), ("--kill-after", after), ("--back", back))
            if value is not None
        ]
        if given:
            raise UsageError(f"{given[0]} says when to kill: give --kill NODE[:LOCAL_RANK] too")
        return None
    found = KILL.match(kill)
    if found is None or int(found["node"]) > nodes:
        raise UsageError(
            f"--kill {shown(kill)}: name a node of the rehearsal, node1 to node{nodes}, "
            "and a local rank on it to kill only that rank (e.g. node2 or node2:1)",
            field="--kill",
            value=kill,
        )
    if (at is None) == (after is None):
        raise UsageError(
            "--kill: say when, with either --kill-at SECONDS (after the nodes started) or "
            "--kill-after TEXT (once a line of the script's output holds it), not both"
        )
    if after is not None and not after.strip():
        raise UsageError("--kill-after: give the text of a line the script prints")
    rank = None if found["rank"] is None else int(found["rank"])
    if back is not None and rank is not None:
        raise UsageError(
            f"--back: a killed rank comes back only by the launcher's restart "
            f"(launch.restarts); --back brings a whole node back: --kill node{found['node']}"
        )
    return Kill(f"node{found['node']}", rank, at, after, back)


@dataclass
class Injection:
    """A kill as the rehearsal carries it out: armed, done, and the node back."""

    kill: Kill
    seen_after: float | None = None
    """When a line first held the --kill-after text."""
    killed_at: float | None = None
    back_at: float | None = None

    def watch(self, line: Line) -> None:
        if self.kill.after is not None and self.seen_after is None and self.kill.after in line.text:
            self.seen_after = line.at

    def due(self, now: float) -> bool:
        """Time to kill: the moment came, or the line appeared."""
        if self.killed_at is not None:
            return False
        if self.kill.at is not None:
            return now >= self.kill.at
        return self.seen_after is not None

    def back_due(self, now: float) -> bool:
        kill = self.kill
        return (
            kill.back is not None
            and self.killed_at is not None
            and self.back_at is None
            and now >= self.killed_at + kill.back
        )

    @property
    def lost(self) -> str | None:
        """The node whose container was killed and did not come back."""
        if self.kill.local_rank is None and self.killed_at is not None and self.back_at is None:
            return self.kill.node
        return None

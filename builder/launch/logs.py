"""Reading a launcher's output: what every launcher's log reading shares (each launcher
reads its own lines: ``Launcher.failures``, ``Launcher.node_log``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeFailure:
    """A node the launcher's output names as failed: what happened, and its lines."""

    node: str
    what: str
    log_tail: str


def tail(text: str, lines: int = 15) -> str:
    """The last lines of a log, enough to act on."""
    return "\n".join(text.rstrip().splitlines()[-lines:])

"""The script's own output in a rehearsal, as it comes: each node's container followed
line by line, every line of a rank shown with its node and rank, kept for ``--json``,
and handed to whoever waits for a line (a fault injected after a checkpoint).

torchrun's console lines start with the rank (``[rank3]:``, which the plan's
``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE`` asks for); lines without one are the
launcher's own, kept but not shown. A probe's report lines are read, not shown.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.rehearse.report import REPORT_LINE

if TYPE_CHECKING:
    from collections.abc import Callable

    from builder.rehearse.session import Node, Session

RANK_LINE = re.compile(r"^\[rank(\d+)\]:(.*)$")
KEPT = 5000
"""The script's lines an outcome keeps (the last ones; a long training prints more)."""


@dataclass(frozen=True)
class Line:
    """One line of the script's output: its node, its rank, and when it came (seconds
    after the rehearsal began following)."""

    node: str
    rank: int
    text: str
    at: float


class Streams:
    """Follows each node's container in a thread of its own until it stops."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.lines: deque[Line] = deque(maxlen=KEPT)
        self.watchers: list[Callable[[Line], None]] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._start = time.monotonic()

    def now(self) -> float:
        """Seconds since the rehearsal began following."""
        return time.monotonic() - self._start

    def follow(self, node: Node) -> None:
        """Follow node's container (again, after it came back) from its first line."""
        thread = threading.Thread(target=self._read, args=(node,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _read(self, node: Node) -> None:
        try:
            for text in self.session.engine.follow(node.container):
                self._add(node.name, text)
        except Exception:  # a container removed under the stream ends it
            return

    def _add(self, node: str, text: str) -> None:
        found = RANK_LINE.match(text)
        if found is None:
            return  # the launcher's own line: in the node's log, read when it fails
        line = Line(node, int(found[1]), found[2], self.now())
        with self._lock:
            self.lines.append(line)
            watchers = list(self.watchers)
        if not REPORT_LINE.search(line.text):
            self.session.say(f"{line.node} rank {line.rank} | {line.text}")
        for watcher in watchers:
            watcher(line)

    def stop(self, wait: float = 2.0) -> None:
        """Let the readers catch up with containers that have stopped."""
        deadline = time.monotonic() + wait
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def as_data(self) -> list[dict[str, object]]:
        with self._lock:
            return [{"node": x.node, "rank": x.rank, "line": x.text} for x in self.lines]

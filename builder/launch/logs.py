"""Reading a launcher's output: what every launcher's log reading shares (each launcher
reads its own lines: ``Launcher.failures``, ``Launcher.node_log``)."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.errors import terminal_text

if TYPE_CHECKING:
    from pathlib import Path


@dataclass(frozen=True)
class NodeFailure:
    """A node the launcher's output names as failed: what happened, and its lines."""

    node: str
    what: str
    log_tail: str
    local_rank: int | None = None
    """The failed rank's local rank, where the launcher names it."""


def tail(text: str, lines: int = 15) -> str:
    """The last lines of a log, enough to act on, with no control character (a rank's
    colours and escapes stay in its own log)."""
    return terminal_text("\n".join(text.rstrip().splitlines()[-lines:]))


FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
TRACEBACK = "Traceback (most recent call last):"
RANK_PREFIX = re.compile(r"^(?:\[[a-z]*\d+\]: ?)+")
"""The prefixes of a rank's line: the launcher's ([rank3]:, torchrun's [default0]:) and
torch's own on a rank's traceback ([rank3]: )."""


@dataclass(frozen=True)
class Raised:
    """Where a script raised, read from a Python traceback: its frame (the last one in
    the script where one is, else the last) and the exception line."""

    file: str
    line: int
    function: str
    error: str

    def text(self) -> str:
        return terminal_text(f"{self.file} line {self.line}, in {self.function}: {self.error}")


def raised_in(text: str, script: str | None = None) -> Raised | None:
    """The raising line of the last Python traceback in text (a rank's stderr, an error
    file's call stack, or console lines with their rank prefixes), or None."""
    lines = [RANK_PREFIX.sub("", line) for line in text.splitlines()]
    starts = [i for i, line in enumerate(lines) if line.strip() == TRACEBACK]
    if not starts:
        return None
    frames: list[re.Match[str]] = []
    error = ""
    for line in lines[starts[-1] + 1 :]:
        if frame := FRAME.match(line):
            frames.append(frame)
        elif line[:1] not in (" ", "\t", "") and frames:
            error = line.strip()
            break
    if not frames:
        return None
    name = script.rsplit("/", 1)[-1] if script else None
    own = [f for f in frames if name and f["file"].rsplit("/", 1)[-1] == name]
    frame = (own or frames)[-1]
    return Raised(frame["file"], int(frame["line"]), frame["function"].strip(), error)


@dataclass(frozen=True)
class RankLog:
    """One rank's logs of one attempt, in a run's logs folder (launch.logs)."""

    node: str
    attempt: int
    local_rank: int
    folder: Path
    """Its stdout.log and stderr.log, and error.json where the script uses @record."""

    def first_line(self, pattern: re.Pattern[str] | None = None) -> str:
        """The first line of its stdout (matching pattern where one is given), or ""."""
        try:
            with (self.folder / "stdout.log").open(errors="replace") as lines:
                found = (line.rstrip("\n") for line in lines if line.strip())
                return next((x for x in found if pattern is None or pattern.search(x)), "")
        except OSError:
            return ""


@dataclass(frozen=True)
class RankError:
    """The rank that failed on a node, and where its script raised."""

    log: RankLog
    raised: Raised | None
    traceback: str


def error_of(log: RankLog, script: str | None) -> RankError | None:
    """Where the rank of log raised: from its error file (the script's @record) or its
    stderr; None when neither holds a traceback."""
    error_file = log.folder / "error.json"
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
        record = json.loads(error_file.read_text(errors="replace"))["message"]
        stack = str(record["extraInfo"]["py_callstack"])
        if raised := raised_in(stack, script):
            return RankError(log, raised, tail(stack, 25))
    with contextlib.suppress(OSError):
        stderr = (log.folder / "stderr.log").read_text(errors="replace")
        if raised := raised_in(stderr, script):
            return RankError(log, raised, tail(stderr[stderr.rfind(TRACEBACK) :], 25))
    return None

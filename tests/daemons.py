"""Real daemons the tests start on this machine (sshd, dockerd, a registry): each
writes to a log of its own, and every wait on one fails with why it died, not with
a bare timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

LOG_LINES = 40
SSHD_DIR = Path("/run/sshd")


@dataclass
class Daemon:
    """A started daemon and its log."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def why(self) -> str:
        """What a failure message says: whether it still runs, and the end of its log."""
        code = self.process.poll()
        state = "still runs" if code is None else f"exited with code {code}"
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        tail = "\n".join(text.splitlines()[-LOG_LINES:]) or "(its log is empty)"
        return f"{self.name} {state}; the end of {self.log}:\n{tail}"

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ready() until it holds; fail at once if the daemon exits, or at timeout."""
        deadline = time.monotonic() + timeout
        while not ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{what} within {timeout:.0f} s: {self.why()}")
            time.sleep(0.3)

    def stop(self, timeout: float = 30) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_daemon(name: str, argv: Sequence[str], log: Path) -> Daemon:
    """argv in the foreground of a process of ours, stdout and stderr into log."""
    with log.open("ab") as sink:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(list(argv), stdout=sink, stderr=sink, stdin=subprocess.DEVNULL)
    return Daemon(name, process, log)


def sshd_ready() -> None:
    """What Debian's service start makes for sshd and a fresh machine lacks (its start is
    blocked by policy-rc.d here): the privilege separation directory, root's and 0755.
    Without it sshd exits at once: "Missing privilege separation directory"."""
    if not SSHD_DIR.is_dir() and os.geteuid() == 0:
        SSHD_DIR.mkdir(mode=0o755)
        SSHD_DIR.chmod(0o755)

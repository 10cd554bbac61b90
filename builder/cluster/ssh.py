"""This machine's ssh to the nodes (the user's own, or a named config): the command
lines, commands on many nodes in parallel, and the check that every node answers
before anything is sent or started (exit 16 naming each node that does not)."""

from __future__ import annotations

import shlex
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.errors import NodeUnreachable, ToolMissing, UsageError, shown

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path

CONNECT_TIMEOUT = 10


@dataclass(frozen=True)
class Ssh:
    """This machine's ssh to the nodes: batch mode (no password prompt), a connect
    timeout, and the user's own config unless one is named."""

    config: Path | None = None
    connect_timeout: int = CONNECT_TIMEOUT

    def argv(self, node: str, command: Sequence[str], *, tty: bool = False) -> list[str]:
        """ssh running command on node (tty: in a terminal of its own, whose hangup, when
        this ssh ends, reaches the command as it reaches a user's: launch.sh's trap then
        runs the plan's stop)."""
        if not node or node.startswith("-") or not node.isprintable() or " " in node:
            raise UsageError(f"{shown(node)} is not a node's host name", value=node)
        argv = ["ssh", "-tt"] if tty else ["ssh"]
        if self.config is not None:
            argv += ["-F", str(self.config)]
        argv += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout}"]
        # a node that dies mid-way (no FIN, no RST) is noticed in about a minute
        argv += ["-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4"]
        return [*argv, node, shlex.join(command)]


class Nodes:
    """Commands on the nodes, in parallel, each with its output and exit code; every ssh
    process still running is ended on the way out."""

    def __init__(self, ssh: Ssh, say: Callable[[str], None]) -> None:
        self.ssh = ssh
        self.say = say
        self.running: list[subprocess.Popen[str]] = []
        self.lock = threading.Lock()
        self.stopping = False

    def run(
        self, commands: Mapping[str, Sequence[str]], timeout: float, *, tty: bool = False
    ) -> dict[str, tuple[int | None, str]]:
        """{node: (exit code, or None when it ran past timeout; output)}."""
        if not commands:
            return {}
        pool = ThreadPoolExecutor(max_workers=min(32, len(commands)))
        futures = {
            node: pool.submit(self._one, node, command, timeout, tty)
            for node, command in commands.items()
        }
        try:
            return {node: future.result() for node, future in futures.items()}
        except BaseException:  # Ctrl-C: no ssh of ours starts after it or outlives it
            self.end()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            self.stopping = False

    def _one(
        self, node: str, command: Sequence[str], timeout: float, tty: bool
    ) -> tuple[int | None, str]:
        argv = self.ssh.argv(node, command, tty=tty)
        with self.lock:
            if self.stopping:
                return None, "not started: stopping"
            try:
                process = subprocess.Popen(  # an argv list, no shell here
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    errors="replace",
                )
            except OSError as exc:
                raise ToolMissing(f"cannot run ssh to reach {node}: {exc}", tool="ssh") from None
            self.running.append(process)
        try:
            output, _ = process.communicate(timeout=timeout)
            code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            process.kill()
            code, output = None, _drain(process)
        finally:
            with self.lock:
                self.running.remove(process)
        return code, output.replace("\r\n", "\n")  # a terminal's line ends

    def end(self) -> None:
        with self.lock:
            self.stopping = True
            for process in self.running:
                process.kill()


def reach(nodes: Nodes, names: Sequence[str], who: str, untouched: str) -> None:
    """Every node in names answers ``ssh NODE true``; else NodeUnreachable naming each
    one that did not, with ssh's own message (who: the command; untouched: what it
    has not done yet)."""
    answers = nodes.run(dict.fromkeys(names, ("true",)), nodes.ssh.connect_timeout + 20.0)
    failed = [node for node, (code, _) in answers.items() if code != 0]
    unreachable = [f"{node}: {_ssh_failure(*answers[node])}" for node in failed]
    if unreachable:
        raise NodeUnreachable(
            f"{who} reaches every node with this machine's ssh (`ssh NODE`), and "
            f"{len(unreachable)} of {len(answers)} did not answer; {untouched}:\n"
            + "\n".join(f"  - {line}" for line in unreachable)
            + "\nCheck the node names, your ssh keys and config (or give --ssh-config FILE)",
            nodes=failed,
        )


def _drain(process: subprocess.Popen[str]) -> str:
    """What a killed ssh printed (not waiting on a child of its that keeps the pipe)."""
    try:
        return process.communicate(timeout=10)[0] or ""
    except subprocess.TimeoutExpired:
        return ""


def _ssh_failure(code: int | None, output: str) -> str:
    if code is None:
        return "ssh did not finish connecting in time"
    last = output.strip().splitlines()[-1:] or ["no message"]
    return f"ssh exit {code}: {last[0][:300]}"

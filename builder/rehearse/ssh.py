"""The rehearsal of launchers that reach the nodes over ssh (deepspeed, mpirun).

Every node's container starts with the plan's own `docker run` (sshd is its
main process); once sshd answers on every node, ssh from the first node to
each must come back with the node's name; then the plan's launcher command
runs in the first node's container and pdsh (or mpirun) reaches the rest.
"""

from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING

from builder.launch.actions import ContainerStart
from builder.launch.logs import tail
from builder.rehearse.report import REPORT_LINE

if TYPE_CHECKING:
    from builder.engine.base import Engine
    from builder.launch.plan import LaunchPlan
    from builder.rehearse.session import Node, Session
    from builder.rehearse.staging import Workload

SSHD_WAIT = 30.0
STOP_WAIT = 30.0
FIND_PROCESS = """
import base64, os, sys
script, ranks = base64.b64decode(sys.argv[1]), 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().split(b"\\0")
    except OSError:
        continue
    # `python [-flags] SCRIPT ...`: a rank (not a launcher that names the script)
    if script in argv and os.path.basename(argv[0]).startswith(b"python"):
        before = argv[1 : argv.index(script)]
        ranks += all(a.startswith(b"-") and a not in (b"-m", b"-c") for a in before)
print(ranks)
sys.exit(0 if ranks else 1)
"""


class OverSsh:
    """Containers with sshd on every node, the ssh mesh, the launcher on the first."""

    def __init__(self, session: Session, workload: Workload, plan: LaunchPlan) -> None:
        self.session = session
        self.workload = workload
        self.plan = plan

    def up(self) -> None:
        """Start every node's container and wait until the ssh mesh answers."""
        session = self.session
        starts = self.plan.of_role("start")
        for node, step in zip(session.nodes, starts, strict=True):
            assert isinstance(step.action, ContainerStart)
            session.start(node, step.action)
        session.phase("containers up")
        if session.outcome.ok:
            self._wait_for_sshd()
            session.phase("sshd ready")

    def job(self) -> None:
        """The mesh from the first node, then the plan's launcher command."""
        self._ssh_mesh()
        if self.session.outcome.ok:
            self._launch()

    def _wait_for_sshd(self) -> None:
        session = self.session
        deadline = time.monotonic() + SSHD_WAIT
        waiting = list(session.nodes)
        while waiting:
            for node in list(waiting):
                state = session.state(node)
                if state != "running":
                    waiting.remove(node)
                    session.node_fault(node, f"its container stopped ({state}) before sshd was up")
                elif session.engine.exec(node.container, ["test", "-e", "/run/sshd.pid"])[0] == 0:
                    waiting.remove(node)
            if waiting and time.monotonic() > deadline:
                for node in waiting:
                    session.node_fault(node, f"sshd did not start within {SSHD_WAIT:.0f} s")
                break
            if waiting:
                time.sleep(0.1)

    def _ssh_mesh(self) -> None:
        """From the first node, an ssh command to every node answers with its name."""
        session = self.session
        first = session.nodes[0]
        port = self.workload.spec.image.ssh.port
        for node in session.nodes:
            state = session.state(node)
            if state != "running":
                session.node_fault(node, f"its container stopped ({state}): sshd is gone")
                continue
            code, out = session.engine.exec(
                first.container, ["ssh", "-o", "ConnectTimeout=10", node.name, "hostname"]
            )
            if code != 0 or out.strip() != node.name:
                session.node_fault(
                    node,
                    f"ssh from {first.name} to {node.name} (port {port}) failed "
                    f"(exit {code}): {out.strip()[-500:]}",
                )
        session.phase("ssh mesh ready")

    def _launch(self) -> None:
        """The plan's launcher command (docker exec on the first node)."""
        session, launcher = self.session, self.workload.resolved.launcher
        (step,) = self.plan.of_role("launch")
        first = session.nodes[0]
        session.say(f"job: {self.plan.launcher} on {first.name}")
        code, output = session.engine.cli(step.argv, session.timeout, self._show)
        session.phase("job")
        if code is None:
            hung = self._still_running()
            self._stop(step.stop_argv)
            script = self.workload.spec.launch.script
            for node in hung:
                what = f"still running {script} after {session.timeout:.0f} s"
                session.fault(node.name, what, launcher.node_log(output, node.name))
            if not hung:
                session.fault(
                    None, f"the job did not finish within {session.timeout:.0f} s", tail(output)
                )
        elif code != 0:
            failed = launcher.failures(output)
            for found in failed:
                session.fault(found.node, found.what, found.log_tail)
            if not failed:
                session.fault(None, f"the launcher exited with code {code}", tail(output))
        session.judge(output, self.workload.expected)

    def _stop(self, argv: tuple[str, ...] | None) -> None:
        """The plan's stop for a launcher that ran past the timeout: what launch.sh runs
        on Ctrl-C (the nodes are removed after, unless kept)."""
        if argv is not None:
            code, output = self.session.engine.cli(argv, STOP_WAIT)
            self.session.say(f"stopped the launcher (exit {code}): {output.strip()[-300:]}")

    def _show(self, line: str) -> None:
        """A launcher's output line, live; the payload's reports make the table instead."""
        if not REPORT_LINE.search(line):
            self.session.say("  " + line)

    def _still_running(self) -> list[Node]:
        """Nodes where a rank still runs the job's script."""
        session = self.session
        script = self.workload.spec.launch.script
        return [
            node for node in session.nodes if ranks_running(session.engine, node.container, script)
        ]


def ranks_running(engine: Engine, container: str, script: str) -> int:
    """How many ranks run script in a running container."""
    # the script's path goes in base64, so this search does not find itself
    wanted = base64.b64encode(script.encode()).decode()
    code, out = engine.exec(container, ["python3", "-c", FIND_PROCESS, wanted])
    return int(out) if code == 0 else 0

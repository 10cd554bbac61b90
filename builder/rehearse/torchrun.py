"""The rehearsal of launchers that every node runs (torchrun, c10d rendezvous).

Each node's container runs the plan's own `docker run ... torchrun ...`; the
rehearsal waits for all of them. Once a node fails, the others get a short
grace and are then judged: torchrun agents whose own ranks succeeded can
wait minutes at their exit barrier for a peer that is gone. The fault goes
to the node torchrun names as the root cause.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from builder.launch.actions import ContainerStart

if TYPE_CHECKING:
    from builder.launch.plan import LaunchPlan
    from builder.rehearse.session import Session
    from builder.rehearse.staging import Workload

FAILURE_GRACE = 10.0


class EveryNode:
    """The same command in every node's container; wait for all, judge each."""

    def __init__(self, session: Session, workload: Workload, plan: LaunchPlan) -> None:
        self.session = session
        self.workload = workload
        self.plan = plan

    def up(self) -> None:
        """Start every node's container: its command is the job, which starts with it."""
        session = self.session
        for node, step in zip(session.nodes, self.plan.of_role("run"), strict=True):
            assert isinstance(step.action, ContainerStart)
            # detached and kept until teardown: the rehearsal waits on them and reads logs
            session.start(node, replace(step.action, detach=True, remove=False))
        session.phase("containers up")

    def job(self) -> None:
        session = self.session
        codes = self._wait_all()
        session.phase("job")
        output = ""  # the ranks' reports: stdout only, where stderr cannot cut into a line
        failed = any(code not in (None, 0) for code in codes.values())
        for node in session.nodes:
            output += session.engine.logs(node.container, stderr=False)
            logs = session.engine.logs(node.container)
            code = codes[node.name]
            if code is None and not failed:
                session.node_fault(node, f"still running after {session.timeout:.0f} s", logs)
            elif code:
                launcher = self.workload.resolved.launcher
                causes = launcher.failures(logs)[:1]  # the root cause
                for found in causes:
                    session.fault(found.node, found.what, found.log_tail)
                if not causes:
                    what = f"{launcher.name} exited with code {code}"
                    session.fault(node.name, what, launcher.node_log(logs, node.name))
        session.judge(output, self.workload.expected)

    def _wait_all(self) -> dict[str, int | None]:
        """Each node's exit code; None for those still running at the end."""
        session = self.session
        deadline = time.monotonic() + session.timeout
        codes: dict[str, int | None] = {node.name: None for node in session.nodes}
        first_failure: float | None = None
        while True:
            for node in session.nodes:
                if codes[node.name] is None:
                    codes[node.name] = session.engine.exit_code(node.container)
            now = time.monotonic()
            if first_failure is None and any(codes.values()):
                first_failure = now
                session.say(f"a node failed; the others get {FAILURE_GRACE:.0f} s to stop")
            if all(code is not None for code in codes.values()) or now > deadline:
                return codes
            if first_failure is not None and now > first_failure + FAILURE_GRACE:
                return codes
            time.sleep(0.2)

"""The rehearsal of launchers that every node runs (torchrun, c10d rendezvous).

Each node's container runs the plan's own `docker run ... torchrun ...`; the
rehearsal follows their output (``stream``), carries out a fault it was asked
to inject (``faults``), and waits for all of them. Once a node fails, the others
get a short grace and are then judged: torchrun agents whose own ranks succeeded
can wait minutes at their exit barrier for a peer that is gone. The fault goes to
the node torchrun names as the root cause, with the line of the script that
raised, read from the rank's own logs in the run's logs folder (launch.logs).
Restarts are read from there too: each attempt of each rank has its folder.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from builder.errors import shown
from builder.launch.actions import ContainerStart
from builder.launch.logs import error_of
from builder.rehearse.stream import Streams

if TYPE_CHECKING:
    from pathlib import Path

    from builder.launch.launchers.base import Launcher
    from builder.launch.logs import RankError, RankLog
    from builder.launch.plan import LaunchPlan
    from builder.rehearse.faults import Injection
    from builder.rehearse.session import Node, Session
    from builder.rehearse.staging import Workload

FAILURE_GRACE = 10.0
RESUMED = re.compile(r"resum|restor|load|snapshot|checkpoint|from (step|epoch)", re.I)
"""A rank's line that says where it resumed (the first such line of an attempt; else its
first line)."""
CONSEQUENCE = re.compile(
    r"Connection (closed|reset) by peer|remote worker crashing|connectFullMesh|Broken pipe"
)
"""A rank's error that says another process failed first (gloo's, NCCL's words)."""
CUDA_ONLY = re.compile(
    r"CUDA|NCCL|cuda:\d|No CUDA GPUs|not compiled with CUDA|nvidia-smi|ProcessGroupNCCL"
)


@dataclass(frozen=True)
class Attempt:
    """When a rank's attempt first wrote a line (seconds on the streams' clock)."""

    log: RankLog
    seen: float


class EveryNode:
    """The same command in every node's container; wait for all, judge each."""

    def __init__(
        self,
        session: Session,
        workload: Workload,
        plan: LaunchPlan,
        *,
        logs: Path | None = None,
        injection: Injection | None = None,
    ) -> None:
        self.session = session
        self.workload = workload
        self.plan = plan
        self.logs = logs
        self.injection = injection
        self.streams = Streams(session)
        self.starts: dict[str, ContainerStart] = {}
        self.attempts: dict[tuple[str, int, int], Attempt] = {}
        self.earlier: dict[str, str] = {}
        """A node's output before it was brought back."""

    @property
    def launcher(self) -> Launcher:
        return self.workload.resolved.launcher

    def up(self) -> None:
        """Start every node's container: its command is the job, which starts with it."""
        session = self.session
        if self.injection is not None:
            self.streams.watchers.append(self.injection.watch)
        for node, step in zip(session.nodes, self.plan.of_role("run"), strict=True):
            assert isinstance(step.action, ContainerStart)
            # detached and kept until teardown: the rehearsal waits on them and reads logs
            self.starts[node.name] = replace(step.action, detach=True, remove=False)
            if session.start(node, self.starts[node.name]):
                self.streams.follow(node)
        session.phase("containers up")

    def job(self) -> None:
        session = self.session
        codes = self._wait_all()
        self.streams.stop()
        session.phase("job")
        self._report_attempts()
        output = ""  # the ranks' reports: stdout only, where stderr cannot cut into a line
        failed = any(code not in (None, 0) for node, code in codes.items() if node != self.lost)
        for node in session.nodes:
            logs = self.earlier.get(node.name, "") + session.engine.logs(node.container)
            output += session.engine.logs(node.container, stderr=False)
            code = codes[node.name]
            if node.name == self.lost:
                continue  # judged below, by what the others did without it
            if code is None and not failed:
                session.node_fault(node, f"still running after {session.timeout:.0f} s", logs)
            elif code:
                self._node_failed(node, code, logs)
        # a node whose ranks lost their peers failed because of another: the cause first
        session.outcome.faults.sort(
            key=lambda fault: bool(CONSEQUENCE.search(f"{fault.what}\n{fault.log_tail}"))
        )
        if self.lost and session.outcome.faults:
            session.fault(
                self.lost,
                "lost (the rehearsal killed its container) and the run could not go on "
                "without it: launch.min_nodes lets torchrun go on with fewer nodes, and "
                "launch.restarts lets it regroup",
            )
        if self.lost and not session.outcome.faults:
            went_on = len(session.nodes) - 1
            self._event(
                f"{self.lost} stayed lost: the run went on and finished on {went_on} node(s) "
                f"(launch.min_nodes {self.workload.spec.launch.min_nodes})"
            )
        session.outcome.lines = self.streams.as_data()
        session.judge(output, self.workload.expected)

    @property
    def lost(self) -> str | None:
        return None if self.injection is None else self.injection.lost

    def _node_failed(self, node: Node, code: int, logs: str) -> None:
        """The fault of a node whose torchrun failed: the root cause torchrun names, with
        the line of the script that raised (from the rank's own logs)."""
        session, launcher = self.session, self.launcher
        causes = launcher.failures(logs)[:1]  # the root cause
        if not causes:
            what = f"{launcher.name} exited with code {code}"
            session.fault(node.name, what + self._hint(logs), launcher.node_log(logs, node.name))
            return
        for found in causes:
            what, tail, where = found.what, found.log_tail, found.node or node.name
            error = self._raised(where, found.local_rank)
            if error is not None and error.raised is not None:
                what += f": {error.raised.text()}"
                tail = error.traceback
            if self.injection and self.injection.killed_at and where == self.injection.kill.node:
                what += f" ({self.injection.kill.target()} was killed by the rehearsal, --kill)"
            session.fault(where, what + self._hint(logs), tail)

    def _raised(self, node: str, local_rank: int | None) -> RankError | None:
        """Where node's failing rank (the local rank the launcher names first) raised,
        from the logs folder (its last attempt)."""
        if self.logs is None:
            return None
        mine = [log for log in self.launcher.rank_logs(self.logs) if log.node == node]
        last = max((log.attempt for log in mine), default=0)
        script = self.workload.spec.launch.script
        ranks = sorted(
            (log for log in mine if log.attempt == last),
            key=lambda log: log.local_rank != local_rank,
        )
        for log in ranks:
            if (error := error_of(log, script)) is not None:
                return error
        return None

    def _hint(self, logs: str) -> str:
        """A hint for a script written for GPUs: the rehearsal's ranks are CPU ranks."""
        if self.workload.expected is None and CUDA_ONLY.search(logs):
            return (
                " (the rehearsal runs CPU ranks over gloo, DS_ACCELERATOR=cpu: a script that "
                "needs CUDA or NCCL fails here; choose the device and backend from "
                "torch.cuda.is_available())"
            )
        return ""

    def _wait_all(self) -> dict[str, int | None]:
        """Each node's exit code; None for those still running at the end."""
        session = self.session
        deadline = time.monotonic() + session.timeout
        codes: dict[str, int | None] = {node.name: None for node in session.nodes}
        first_failure: float | None = None
        while True:
            back = self._inject()
            if back is not None:
                codes[back] = None  # its new container's code is the one that counts
            self._poll_attempts()
            for node in session.nodes:
                if codes[node.name] is None:
                    codes[node.name] = session.engine.exit_code(node.container)
            now = time.monotonic()
            running = [node for node, code in codes.items() if node != self.lost]
            if first_failure is None and any(codes[node] for node in running):
                first_failure = now
                session.say(f"a node failed; the others get {FAILURE_GRACE:.0f} s to stop")
            if all(codes[node] is not None for node in running) or now > deadline:
                if self._coming_back():
                    time.sleep(0.2)
                    continue
                return codes
            if first_failure is not None and now > first_failure + FAILURE_GRACE:
                return codes
            time.sleep(0.2)

    def _coming_back(self) -> bool:
        injection = self.injection
        return bool(injection and injection.kill.back is not None and injection.back_at is None)

    def _inject(self) -> str | None:
        """Kill what --kill names once it is due; bring the node back once --back is (its
        name, then)."""
        injection, session = self.injection, self.session
        if injection is None:
            return None
        now = self.streams.now()
        node = next(n for n in session.nodes if n.name == injection.kill.node)
        if injection.due(now):
            injection.killed_at = now
            kill = injection.kill
            if kill.local_rank is None:
                code, said = session.engine.cli(["docker", "kill", node.container], 30)
                done = f"killed {kill.target()}" if code == 0 else f"could not kill: {said}"
            else:
                _, pids = session.engine.exec(node.container, kill.rank_command())
                done = f"killed {kill.target()} (pids {', '.join(pids.split()) or 'none found'})"
            self._event(f"{now:.1f} s: {done}, {kill.when()}")
        elif injection.back_due(now):
            injection.back_at = now
            self.earlier[node.name] = session.engine.logs(node.container)
            session.engine.remove_container(node.container)
            if session.start(node, self.starts[node.name]):
                self.streams.follow(node)
            self._event(f"{now:.1f} s: {node.name} came back (its `docker run` again)")
            return node.name
        return None

    def _event(self, text: str) -> None:
        self.session.outcome.events.append(text)
        self.session.say(text)

    def _poll_attempts(self) -> None:
        """Note when each rank's attempt first wrote a line: restarts, and how long one
        took, are read from there."""
        if self.logs is None:
            return
        for log in self.launcher.rank_logs(self.logs):
            key = (log.node, log.attempt, log.local_rank)
            if key not in self.attempts and _has_output(log):
                self.attempts[key] = Attempt(log, self.streams.now())

    def _report_attempts(self) -> None:
        """Each restart: which node, which attempt, where its ranks resumed, and (after an
        injected kill) how long until every rank of the attempt was running again."""
        self._poll_attempts()
        restarted = sorted({(a.log.attempt, a.log.node) for a in self.attempts.values()})
        for attempt, node in restarted:
            if attempt == 0:
                continue
            mine = sorted(
                (
                    a
                    for a in self.attempts.values()
                    if (a.log.node, a.log.attempt) == (node, attempt)
                ),
                key=lambda a: a.log.local_rank,
            )
            first = mine[0].log
            said = first.first_line(RESUMED) or first.first_line()
            self._event(
                f"restart: {node} attempt {attempt}, local rank(s) "
                f"{', '.join(str(a.log.local_rank) for a in mine)} running again; local rank "
                f"{first.local_rank} said {shown(said)}"
            )
        injection = self.injection
        if injection is None or injection.killed_at is None:
            return
        later = [a for a in self.attempts.values() if a.log.attempt == 1]
        if later:
            seconds = max(a.seen for a in later) - injection.killed_at
            self.session.outcome.restart_seconds = round(seconds, 2)
            self._event(f"restart: every rank was running again {seconds:.1f} s after the kill")


def _has_output(log: RankLog) -> bool:
    try:
        return (log.folder / "stdout.log").stat().st_size > 0
    except OSError:
        return False

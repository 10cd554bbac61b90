"""`builder rehearse`: the multi-node run of a stack, on this machine, in real containers.

It writes the same bundle `builder bundle` writes (keys, hostfile,
.deepspeed_env, plan) for nodes node1..nodeN, runs the plan's own `docker
run` / `docker exec` commands (adapted only where a laptop lacks something,
see nodes.py), checks the ssh mesh the launcher needs, runs the probe job (or
the user's script) and reads back every rank. Teardown always happens, also
on Ctrl-C and on failure, unless ``keep``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.cluster.dsenv import dsenv_for
from builder.errors import UsageError
from builder.launch.bundle import write_bundle
from builder.launch.plan import DSENV, OVER_SSH, launch_plan
from builder.rehearse.nodes import LABEL, Node, adapt_exec, adapt_run, run_docker
from builder.rehearse.report import MARK, Expected, Fault, RankRow, check_reports, probe_reports
from builder.rootfs import CLUSTER_DIR
from builder.spec import Accelerator, Mount

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from builder.engine import Engine
    from builder.spec import Spec

LAUNCHERS = ("deepspeed", "torchrun", "mpirun", "slurm")
PROBE = "probe.py"
# Reaches each rank through the launcher's own channel, with what quoting breaks on.
PROBE_VALUE = "a b $HOME 'q' \"dq\" ;|&%h ✓"
DSENV_VALUE = "only in .deepspeed_env: $x %n 'y'"
USER_SCRIPTS = "/opt/builder-rehearsal"
SSHD_WAIT = 30.0
FAILURE_GRACE = 10.0
# torchrun's error summary: "Root Cause (first observed failure): ... host : node2
# ... rank : 2 (local_rank: 0) ... exitcode : 3"
ROOT_CAUSE = re.compile(
    r"Root Cause.*?host\s*:\s*(\S+)\s+rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.S
)
FIND_PROCESS = """
import base64, os, sys
script = base64.b64decode(sys.argv[1])
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().split(b"\\0")
    except OSError:
        continue
    # `python [-flags] SCRIPT ...`: a rank (not a launcher that names the script)
    if script in argv and os.path.basename(argv[0]).startswith(b"python"):
        before = argv[1 : argv.index(script)]
        if all(a.startswith(b"-") and a not in (b"-m", b"-c") for a in before):
            sys.exit(0)
sys.exit(1)
"""


@dataclass
class Outcome:
    """What the rehearsal found; ok when there is no fault."""

    launcher: str
    nodes: tuple[str, ...]
    phases: list[tuple[str, float]] = field(default_factory=list)
    rows: list[RankRow] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    kept: str | None = None

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
        }


class Rehearsal:
    """One rehearsal: prepare, start, check ssh, run the job, tear down."""

    def __init__(
        self,
        spec: Spec,
        *,
        image: str,
        engine: Engine,
        nodes: int,
        launcher: str,
        script: str | None = None,
        args: Sequence[str] = (),
        timeout: float = 300.0,
        say: Callable[[str], None] = lambda _: None,
    ) -> None:
        if launcher not in LAUNCHERS:
            raise UsageError(f"--launcher {launcher!r}: choose one of {', '.join(LAUNCHERS)}")
        if not 1 <= nodes <= 16:
            raise UsageError(f"--nodes {nodes}: a rehearsal runs 1 to 16 nodes")
        self.id = f"rehearse-{uuid.uuid4().hex[:8]}"
        self.engine = engine
        self.image = image
        self.launcher = launcher
        self.timeout = timeout
        self.say = say
        self.nodes = tuple(Node(f"node{i}", f"{self.id}-node{i}") for i in range(1, nodes + 1))
        self.network = self.id
        self.folder = Path(tempfile.mkdtemp(prefix=f"builder-{self.id}-"))
        self.probe = script is None
        self.spec = self._rehearsal_spec(spec, script, tuple(args))
        self.outcome = Outcome(launcher, tuple(n.name for n in self.nodes))
        self._clock = time.monotonic()
        self.after_start: Callable[[Rehearsal], None] | None = None
        """Called once the nodes are up, before the job (the tests inject faults here)."""

    # -- the spec the plan is made from ------------------------------------

    def _rehearsal_spec(self, spec: Spec, script: str | None, args: tuple[str, ...]) -> Spec:
        launch = spec.launch
        env = dict(launch.env)
        mounts = list(launch.mounts)
        if script is None:
            script, args = f"{CLUSTER_DIR}/{PROBE}", ()
            env["BUILDER_PROBE_VALUE"] = PROBE_VALUE
        elif Path(script).is_file():  # a script on this machine: mount its folder
            local = Path(script).resolve()
            mounts.append(Mount(str(local.parent), USER_SCRIPTS, read_only=True))
            script = f"{USER_SCRIPTS}/{local.name}"
        if spec.image.accelerator is not Accelerator.cpu:
            env.setdefault("DS_ACCELERATOR", "cpu")  # no accelerator on this machine
        launcher = "torchrun" if self.launcher == "slurm" else self.launcher
        launch = replace(
            launch,
            launcher=launcher,  # type: ignore[arg-type]  # checked against LAUNCHERS
            runtime="docker",
            nodes=tuple(node.name for node in self.nodes),
            master_addr=None,
            mounts=tuple(mounts),
            env=env,
            script=script,
            args=args,
        )
        return replace(spec, launch=launch)

    # -- phases -------------------------------------------------------------

    def phase(self, name: str) -> None:
        now = time.monotonic()
        self.outcome.phases.append((name, now - self._clock))
        self.say(f"{name}: {now - self._clock:.1f} s")
        self._clock = now

    def run(self) -> Outcome:
        """Every phase in order; stops at the first one that finds a fault."""
        self._prepare()
        self._preflight()
        self.phase("image check")
        if self.launcher == "slurm":
            from builder.rehearse.slurm import SlurmRehearsal

            SlurmRehearsal(self).run()
            return self.outcome
        if self.spec.launch.launcher in OVER_SSH:
            self._start_sshd_nodes()
            if self.outcome.ok:
                self._ssh_mesh()
            if self.outcome.ok:
                self._run_launcher()
        else:
            self._run_torchrun_nodes()
        return self.outcome

    def _prepare(self) -> None:
        plan_files = write_bundle(self.spec, self.folder, image=self.image, force=True)
        # as `builder dsenv --set`: a value only .deepspeed_env carries to the ranks
        extra = {"BUILDER_PROBE_DSENV": DSENV_VALUE}
        (self.folder / DSENV).write_text(dsenv_for(self.spec, extra, None))
        if self.probe:
            shutil.copyfile(Path(__file__).with_name("probe_job.py"), self.folder / PROBE)
            (self.folder / "probe.json").write_text(
                json.dumps({"env": self.expected().env, "timeout": self.timeout})
            )
        self.say(f"bundle for {len(self.nodes)} nodes in {self.folder} ({len(plan_files)} files)")
        self.plan = launch_plan(self.spec, image=self.image, cluster_dir=str(self.folder))
        self.engine.create_network(self.network)
        self.phase("prepare")

    def expected(self) -> Expected:
        env = dict(self.spec.launch.env)
        if self.spec.launch.launcher in ("deepspeed", "gaudi_spawn"):
            env["BUILDER_PROBE_DSENV"] = DSENV_VALUE
        return Expected(
            nodes=tuple(node.name for node in self.nodes),
            slots=self.spec.launch.slots,
            master=self.nodes[0].name,
            env=env,
        )

    def _preflight(self) -> None:
        """The image has what the launcher needs (a clear message when it does not)."""
        needs = {
            "deepspeed": ["sshd", "ssh", "pdsh", "deepspeed", "python"],
            "mpirun": ["sshd", "ssh", "mpirun", "python"],
            "torchrun": ["torchrun", "python"],
            "slurm": ["torchrun", "python"],
        }[self.launcher]
        probe = "for t in " + " ".join(needs) + '; do command -v "$t" >/dev/null || echo "$t"; done'
        try:
            missing = self.engine.run(self.image, ["-c", probe], entrypoint=["/bin/sh"]).split()
        except Exception as exc:
            raise UsageError(f"cannot run image {self.image}: {exc}") from None
        if missing:
            raise UsageError(
                f"image {self.image} lacks {', '.join(missing)}, which the {self.launcher} "
                f"rehearsal needs: build it with `builder build` from a stack that has them "
                f"(image.ssh, image.pdsh, image.deepspeed, image.openmpi) or choose another "
                f"--launcher"
            )

    def _start(self, node: Node, argv: Sequence[str]) -> None:
        adapted = adapt_run(argv, self.spec, node, self.network, self.id)
        code, output = run_docker(adapted, timeout=120)
        if code != 0:
            what = "its container did not start" + (" within 120 s" if code is None else "")
            self.outcome.faults.append(Fault(node.name, what, _tail(output)))

    def _start_sshd_nodes(self) -> None:
        starts = [c for c in self.plan.commands if c.argv[:2] == ("docker", "run")]
        for node, command in zip(self.nodes, starts, strict=True):
            self._start(node, command.argv)
        self.phase("containers up")
        if not self.outcome.ok:
            return
        deadline = time.monotonic() + SSHD_WAIT
        waiting = list(self.nodes)
        while waiting:
            for node in list(waiting):
                state = self._state(node)
                if state != "running":
                    waiting.remove(node)
                    self.node_fault(node, f"its container stopped ({state}) before sshd was up")
                elif self.engine.exec(node.container, ["test", "-e", "/run/sshd.pid"])[0] == 0:
                    waiting.remove(node)
            if waiting and time.monotonic() > deadline:
                for node in waiting:
                    self.node_fault(node, f"sshd did not start within {SSHD_WAIT:.0f} s")
                break
            if waiting:
                time.sleep(0.1)
        self.phase("sshd ready")
        if self.after_start and self.outcome.ok:
            self.after_start(self)

    def _ssh_mesh(self) -> None:
        """From the first node, an ssh command to every node answers with its name."""
        first = self.nodes[0]
        port = self.spec.image.ssh.port
        for node in self.nodes:
            state = self._state(node)
            if state != "running":
                self.node_fault(node, f"its container stopped ({state}): sshd is gone")
                continue
            code, out = self.engine.exec(
                first.container,
                ["ssh", "-o", "ConnectTimeout=10", node.name, "hostname"],
            )
            if code != 0 or out.strip() != node.name:
                self.node_fault(
                    node,
                    f"ssh from {first.name} to {node.name} (port {port}) failed "
                    f"(exit {code}): {out.strip()[-500:]}",
                )
        self.phase("ssh mesh ready")

    def _run_launcher(self) -> None:
        """The plan's launcher command (docker exec on the first node)."""
        (command,) = [c for c in self.plan.commands if c.argv[:2] == ("docker", "exec")]
        argv = adapt_exec(command.argv, self.spec, self.nodes[0])
        self.say(f"job: {self.spec.launch.launcher} on {self.nodes[0].name}")
        code, output = run_docker(argv, self.timeout, self._show)
        self.phase("job")
        if code is None:
            hung = self._still_running()
            for node in hung:
                self.outcome.faults.append(
                    Fault(
                        node.name,
                        f"still running {self.spec.launch.script} after {self.timeout:.0f} s",
                        _node_lines(output, node.name),
                    )
                )
            if not hung:
                self.outcome.faults.append(
                    Fault(
                        None, f"the job did not finish within {self.timeout:.0f} s", _tail(output)
                    )
                )
        self.judge(output, code, launcher_output=True)

    def _run_torchrun_nodes(self) -> None:
        """torchrun: every node's container runs the same torchrun; wait for all.

        Once a node fails, the others get a short grace and are then stopped:
        torchrun agents whose own ranks succeeded can wait minutes at their exit
        barrier for a peer that is gone. The fault goes to the node torchrun
        names as the root cause.
        """
        for node, command in zip(self.nodes, self.plan.commands, strict=True):
            self._start(node, command.argv)
        self.phase("containers up")
        if not self.outcome.ok:
            return
        codes = self._wait_all()
        self.phase("job")
        output = ""  # the ranks' reports: stdout only, where stderr cannot cut into a line
        failed = any(code not in (None, 0) for code in codes.values())
        for node in self.nodes:
            output += self.engine.logs(node.container, stderr=False)
            logs = self.engine.logs(node.container)
            code = codes[node.name]
            if code is None and not failed:
                self.node_fault(node, f"still running after {self.timeout:.0f} s", logs)
            elif code:
                cause = ROOT_CAUSE.search(logs)
                if cause:
                    host, rank, exit_code = cause.groups()
                    what = f"rank {rank} exited with code {exit_code} (torchrun's root cause)"
                    self.outcome.faults.append(Fault(host, what, _rank_lines(logs)))
                else:
                    self.node_fault(node, f"torchrun exited with code {code}", _rank_lines(logs))
        self.judge(output, 0 if all(c == 0 for c in codes.values()) else 1)

    def _wait_all(self) -> dict[str, int | None]:
        """Each node's torchrun exit code; None for those still running at the end."""
        deadline = time.monotonic() + self.timeout
        codes: dict[str, int | None] = {node.name: None for node in self.nodes}
        first_failure: float | None = None
        while True:
            for node in self.nodes:
                if codes[node.name] is None:
                    codes[node.name] = self.engine.exit_code(node.container)
            now = time.monotonic()
            if first_failure is None and any(codes.values()):
                first_failure = now
                self.say("a node failed; the others get 10 s to stop")
            if all(code is not None for code in codes.values()) or now > deadline:
                return codes
            if first_failure is not None and now > first_failure + FAILURE_GRACE:
                return codes
            time.sleep(0.2)

    def judge(self, output: str, code: int | None, *, launcher_output: bool = False) -> None:
        if launcher_output and code not in (0, None):
            failed = _pdsh_failures(output)
            for name, node_code in failed:
                self.outcome.faults.append(
                    Fault(
                        name, f"its ranks exited with code {node_code}", _node_lines(output, name)
                    )
                )
            if not failed:
                self.outcome.faults.append(
                    Fault(None, f"the launcher exited with code {code}", _tail(output))
                )
        if self.probe:
            rows, faults = check_reports(probe_reports(output), self.expected())
            self.outcome.rows = rows
            known = {(f.node, f.what) for f in self.outcome.faults}
            self.outcome.faults += [f for f in faults if (f.node, f.what) not in known]

    # -- helpers -------------------------------------------------------------

    def _show(self, line: str) -> None:
        """A launcher's output line, live; the probe's reports make the table instead."""
        if MARK not in line:
            self.say("  " + line)

    def _state(self, node: Node) -> str:
        try:
            return self.engine.container_state(node.container)
        except KeyError:
            return "gone"

    def _still_running(self) -> list[Node]:
        """Nodes where a rank still runs the job's script."""
        # the script's path goes in base64, so this search does not find itself
        wanted = base64.b64encode(self.spec.launch.script.encode()).decode()
        return [
            node
            for node in self.nodes
            if self._state(node) == "running"
            and self.engine.exec(node.container, ["python3", "-c", FIND_PROCESS, wanted])[0] == 0
        ]

    def node_fault(self, node: Node, what: str, logs: str | None = None) -> None:
        if logs is None:
            with contextlib.suppress(Exception):
                logs = self.engine.logs(node.container)
        self.outcome.faults.append(Fault(node.name, what, _tail(logs or "")))

    def teardown(self, *, keep: bool) -> None:
        """Remove every container and the network (and the bundle), unless keep."""
        if keep:
            self.outcome.kept = str(self.folder)
            self.say(
                f"kept: containers {', '.join(n.container for n in self.nodes)} on network "
                f"{self.network}, bundle {self.folder}; remove with "
                f"`docker rm -f $(docker ps -aq --filter label={LABEL}={self.id})` "
                f"and `docker network rm {self.network}`"
            )
            return
        self.engine.remove_labelled(LABEL, self.id)
        self.engine.remove_network(self.network)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.phase("teardown")


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _rank_lines(logs: str) -> str:
    """A torchrun node's log tail without the agent's own traceback, which would
    push the ranks' output (and their tracebacks) out of view."""
    lines = logs.splitlines()
    for start, line in enumerate(lines):
        if line.startswith("Traceback") and "bin/torchrun" in "".join(lines[start + 1 : start + 2]):
            end = next(
                (i for i in range(start, len(lines)) if lines[i].startswith("torch.distributed")),
                start,
            )
            lines[start : end + 1] = []
            break
    return _tail("\n".join(lines), 25)


def _pdsh_failures(output: str) -> list[tuple[str, int]]:
    """pdsh's `pdsh@host: NODE: ssh exited with exit code N` lines: (node, code)."""
    found = re.findall(r"pdsh@\S+: (\S+): ssh exited with exit code (\d+)", output)
    return [(name, int(code)) for name, code in found]


def _node_lines(output: str, node: str) -> str:
    """The output lines pdsh marked as node's."""
    return _tail("\n".join(line for line in output.splitlines() if line.startswith(f"{node}: ")))


def rehearsal_spec(spec: Spec | None, image_labels: dict[str, str]) -> Spec:
    """The spec to rehearse: the given one; else the preset the image was built from
    (its label); else cpu-deepspeed's launch with the image's ssh port."""
    from builder.loader import load_preset
    from builder.presets import preset_names
    from builder.recipe import LABEL_PREFIX

    if spec is not None:
        return spec
    preset = image_labels.get(f"{LABEL_PREFIX}.preset")
    if preset in preset_names():
        return load_preset(preset).spec
    generic = load_preset("cpu-deepspeed").spec
    port = image_labels.get(f"{LABEL_PREFIX}.ssh-port")
    if port and port.isdigit():
        ssh = replace(generic.image.ssh, port=int(port))
        generic = replace(generic, image=replace(generic.image, ssh=ssh))
    return generic


def rehearse(
    spec: Spec | None,
    *,
    image: str | None,
    engine: Engine,
    nodes: int,
    launcher: str | None,
    script: str | None = None,
    args: Sequence[str] = (),
    timeout: float = 300.0,
    keep: bool = False,
    say: Callable[[str], None] = lambda _: None,
    after_start: Callable[[Rehearsal], None] | None = None,
) -> Outcome:
    """Rehearse spec's run (or the image's) on nodes containers; always torn down
    unless keep. after_start (tests: fault injection) runs once the nodes are up."""
    from builder.errors import Interrupted

    reference = image or (f"{spec.image.name}:{spec.image.tag}" if spec else None)
    if reference is None:
        raise UsageError("say what to rehearse: a spec file, --preset NAME or --image NAME:TAG")
    if not engine.exists(reference):
        raise UsageError(
            f"image {reference} is not in the local engine: build it with `builder build` "
            "(or pull it) first"
        )
    spec = rehearsal_spec(spec, engine.image(reference).labels)
    rehearsal = Rehearsal(
        spec,
        image=reference,
        engine=engine,
        nodes=nodes,
        launcher=launcher or spec.launch.launcher,
        script=script,
        args=args,
        timeout=timeout,
        say=say,
    )
    rehearsal.after_start = after_start
    try:
        return rehearsal.run()
    except KeyboardInterrupt:
        left = "were left up (--keep)" if keep else "were removed"
        raise Interrupted(f"rehearsal interrupted; its containers and network {left}") from None
    finally:
        rehearsal.teardown(keep=keep)

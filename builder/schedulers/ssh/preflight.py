"""Preflight on the real nodes: the stack's own launch plan with the probe as its
script, run through a launch.sh written for it, each node reached with this
machine's ssh.

The probe's plan differs from the run's only where it must: the script (the
probe, from the cluster folder's ``preflight/``, bound read-only where the
runtime isolates), its arguments, and the container's name (``-preflight``,
so a running job's container is not touched). Runtime, launcher, image,
hostfile, .deepspeed_env, keys, code and cache folders, mounts and
environment are the run's. Before anything starts, every node must answer
over ssh and see the cluster folder; after, whatever the probe started is
stopped and removed, on failure and on Ctrl-C too.
"""

from __future__ import annotations

import shlex
import time
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from builder import architectures
from builder.cluster.folder import run_folder
from builder.cluster.hostfile import read_hostfile, run_hosts
from builder.cluster.ssh import Nodes, Ssh, reach
from builder.contract import HOSTFILE
from builder.errors import BuilderError, Interrupted, UsageError, WrongArchitecture, shown
from builder.launch.logs import tail
from builder.launch.plan import launch_plan
from builder.output import OutputFile, write_files
from builder.payload import payload_text
from builder.preflight.probe import FILES, FOLDER, PROBE, expected_of, preflight_stack
from builder.preflight.report import Finding, judge
from builder.schedulers.ssh.bundle import launch_script, needed_files

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from builder.engine.base import Engine
    from builder.launch.plan import LaunchPlan
    from builder.preflight.probe import Settings
    from builder.preflight.report import Expected, Preflight
    from builder.resolved import Resolved
    from builder.spec.records import Spec

CONNECT_TIMEOUT = 10
STEP_TIMEOUT = 120.0
"""A node's start step (docker run --detach) and each cleanup step."""


def check_bundle(spec: Spec, cluster_dir: Path) -> None:
    """An existing cluster folder must be the bundle of spec's node list: its hostfile is
    what DeepSpeed and the probe's plan read."""
    hostfile = cluster_dir / HOSTFILE
    if not hostfile.exists():
        raise UsageError(
            f"--cluster-dir {cluster_dir} has no {HOSTFILE}: give the folder `builder bundle` "
            "wrote for this spec, or a folder that does not exist yet (preflight writes it)"
        )
    check_bundle_nodes(spec, cluster_dir)


def check_bundle_nodes(spec: Spec, cluster_dir: Path) -> None:
    """A bundle in the folder (its hostfile) is for spec's nodes and slots: a plan of
    other nodes would be printed, or run, against it without a word."""
    hostfile = cluster_dir / HOSTFILE
    if not hostfile.is_file():
        return
    found = [(h.name, h.slots) for h in read_hostfile(hostfile)]
    wanted = [(h.name, h.slots) for h in run_hosts(spec.launch)]
    if found != wanted:
        listed = ", ".join(f"{name} slots={slots}" for name, slots in found)
        spec_says = ", ".join(f"{name} slots={slots}" for name, slots in wanted)
        raise UsageError(
            f"{hostfile} does not match the spec: it lists {shown(listed, quote=False)}; "
            f"launch.nodes and launch.slots give {shown(spec_says, quote=False)}. Rewrite the "
            f"bundle with `builder bundle SPEC -o {cluster_dir} --force` (its keys are kept) "
            "and copy it to the nodes, or fix the spec"
        )


class ClusterPreflight:
    """The probe on spec's nodes: write, reach, run, judge, clean up."""

    def __init__(
        self,
        resolved: Resolved,
        *,
        image: str,
        cluster_dir: Path,
        node_dir: str | None = None,
        settings: Settings,
        ssh: Ssh,
        say: Callable[[str], None] = lambda _: None,
        engine: Callable[[], Engine] | None = None,
    ) -> None:
        self.resolved = resolved
        self.engine = engine
        self.spec = resolved.spec
        self.image = image
        self.where = run_folder(cluster_dir, node_dir)
        self.folder = cluster_dir.resolve()  # where the probe is written, here
        self.there = PurePosixPath(self.where.nodes)  # and where the nodes run it from
        self.settings = settings
        self.say = say
        self.nodes = Nodes(ssh, say)
        self.probe = preflight_stack(resolved, str(self.there), settings)
        self.plan: LaunchPlan = launch_plan(self.probe, image=image, cluster_dir=str(self.there))
        self.script = str(self.there / FOLDER / "launch.sh")
        self.phases: list[tuple[str, float]] = []
        self._clock = time.monotonic()

    def write(self) -> list[Path]:
        """The bundle (when the folder is new; else it must match) and the probe's folder."""
        written: list[Path] = []
        if self.folder.exists():
            check_bundle(self.spec, self.folder)
        else:
            written += self.resolved.scheduler.write(
                self.resolved, self.where, image=self.image, force=False
            )
            self.say(
                f"wrote the bundle to {self.folder}: every node needs it at {self.there} "
                "(shared storage, or copy it)"
            )
        script = launch_script(self.plan, str(self.there), needed_files(self.spec))
        files = [OutputFile(f"{FOLDER}/{name}", 0o644, payload_text(name)) for name in FILES]
        files.append(OutputFile(f"{FOLDER}/launch.sh", 0o755, script))
        # readable to the containers' user: the probe holds no secret
        return written + write_files(files, self.folder, force=True)

    def phase(self, name: str) -> None:
        now = time.monotonic()
        self.phases.append((name, now - self._clock))
        self.say(f"{name}: {now - self._clock:.1f} s")
        self._clock = now

    def run(self) -> Preflight:
        """Reach every node, write the probe's folder, check every node sees it, run the
        probe through the plan and judge; always clean up."""
        if self.folder.exists():
            check_bundle(self.spec, self.folder)
        self.reach()
        self.check_architectures()
        self.write()
        self.check_folder()
        try:
            output, faults = self._job()
            self.cleanup(stop=bool(faults))
        except KeyboardInterrupt:
            # wherever Ctrl-C lands, job or cleanup, the run is stopped and not judged
            self.nodes.end()
            self._cleanup_once_more()
            raise Interrupted(
                "preflight interrupted; what it started on the nodes was stopped and removed"
            ) from None
        except BaseException:
            self.nodes.end()
            self._cleanup_once_more()
            raise
        result = judge(output, self.expected(), faults)
        result.settings = {**self.settings.as_data(), "where": str(self.there)}
        result.phases = self.phases
        return result

    def expected(self) -> Expected:
        """What the probe's reports should show on the plan's nodes."""
        return expected_of(
            self.resolved.platform,
            self.plan.nodes,
            self.spec.launch.slots,
            fabric=self.resolved.fabric.name,
            env=self.resolved.run_environment(),
            settings=self.settings,
        )

    def reach(self) -> None:
        """Every node answers over ssh; else nothing is written or started."""
        reach(self.nodes, self.plan.nodes, "preflight", "nothing was written or started")
        self.phase("nodes reached")

    def check_architectures(self) -> None:
        """Every node's CPU architecture is one the image was built for (image.platforms;
        unset: what this engine's copy of the image was built for, when it has one), asked
        with `uname -m` before anything is written or started."""
        built = self.built_for()
        if not built:
            return
        answers = self.nodes.run(dict.fromkeys(self.plan.nodes, ("uname", "-m")), STEP_TIMEOUT)
        wrong: dict[str, str] = {}
        for node, (code, output) in answers.items():
            machine = (output.strip().splitlines() or [""])[-1].strip()
            known = architectures.named(machine)
            if code == 0 and machine and (known is None or known.platform not in built):
                wrong[node] = machine
        if wrong:
            named = ", ".join(f"{node} is {machine}" for node, machine in wrong.items())
            raise WrongArchitecture(
                f"{named}; the image {self.image} is built for {', '.join(built)} only: its "
                "binaries cannot run there (nothing was written or started). Add the nodes' "
                "architecture to image.platforms, build and push again, or leave these nodes "
                "out of launch.nodes",
                nodes=list(wrong),
            )
        self.phase("architectures checked")

    def built_for(self) -> tuple[str, ...]:
        """The platforms the image exists for: image.platforms, or the architecture of this
        engine's copy of it; () when neither can tell (no engine given or here, or the
        image not built here)."""
        if self.spec.image.platforms:
            return self.spec.image.platforms
        if self.engine is None:
            return ()
        try:
            held = self.engine().image(self.image).architecture
        except BuilderError:
            return ()
        known = architectures.named(held)
        return (known.platform,) if known else ()

    def check_folder(self) -> None:
        """Every node sees the probe's folder where the bundle says the nodes see the
        cluster folder (--node-dir; else this machine's path)."""
        probe = str(self.there / FOLDER / PROBE)
        answers = self.nodes.run(
            dict.fromkeys(self.plan.nodes, ("test", "-r", probe)), STEP_TIMEOUT
        )
        missing = [node for node, (code, _) in answers.items() if code != 0]
        if missing:
            there = shlex.quote(str(self.there))
            raise UsageError(
                f"{', '.join(missing)}: {probe} is not there. The cluster folder must be on "
                f"every node at {self.there}: keep it there on shared storage, or copy it to "
                f"each node (e.g. `rsync -a {shlex.quote(str(self.folder))}/ "
                f"{missing[0]}:{there}/`) and run preflight again",
                field="--cluster-dir",
            )

    def _job(self) -> tuple[str, list[Finding]]:
        timeout = self.settings.timeout
        faults: list[Finding] = []
        self.cleanup(runs=True, quiet=True)  # what an earlier, killed preflight left
        starts = {s.node: s for s in self.plan.of_role("start")}
        if starts:
            answers = self.nodes.run(
                {node: ["sh", self.script, node] for node in starts}, STEP_TIMEOUT
            )
            faults += [
                Finding(
                    node,
                    f"its start step did not end within {STEP_TIMEOUT:.0f} s"
                    if code is None
                    else f"its start step failed (exit {code})",
                    log_tail=tail(output),
                )
                for node, (code, output) in answers.items()
                if code != 0
            ]
            self.phase("nodes up")
            if faults:
                return "", faults
        launches = self.plan.of_role("launch")
        if launches:
            first = launches[0].node
            launch = {first: ["sh", self.script, "launch"]}
            code, output = self.nodes.run(launch, timeout, tty=True)[first]
            outputs = {first: (code, output)}
        else:
            runs = {step.node: ["sh", self.script, step.node] for step in self.plan.of_role("run")}
            outputs = self.nodes.run(runs, timeout, tty=True)
        self.phase("job")
        for node, (code, output) in outputs.items():
            if code is None:
                faults.append(
                    Finding(
                        node, f"the probe still ran after {timeout:.0f} s", log_tail=tail(output)
                    )
                )
            elif code != 0:
                # the nodes the launcher's output names, where it does (pdsh's lines)
                failed = self.resolved.launcher.failures(output)
                faults += [Finding(f.node, f.what, log_tail=f.log_tail) for f in failed]
                if not failed:
                    what = f"the probe's launch exited {code}"
                    faults.append(Finding(node, what, log_tail=tail(output)))
        return "".join(output for _, output in outputs.values()), faults

    def _cleanup_once_more(self) -> None:
        """The stop and removal after an interruption; a second Ctrl-C during it is not
        lost, it only cuts this short (the next preflight removes what is left)."""
        try:
            self.cleanup(stop=True)
        except KeyboardInterrupt:
            self.nodes.end()

    def _stop(self) -> None:
        """launch.sh's own stop arm, on the nodes its steps ran on."""
        if any(step.stop is not None for step in self.plan.steps):
            nodes = {step.node for step in self.plan.steps if step.role != "start"}
            self.nodes.run({node: ["sh", self.script, "stop"] for node in nodes}, STEP_TIMEOUT)

    def cleanup(self, *, stop: bool = False, runs: bool = False, quiet: bool = False) -> None:
        """Remove the containers the start steps left (stop: first run launch.sh's stop,
        for a probe that failed, hung or was interrupted; runs: the run steps' named
        containers too, which are otherwise removed as they end)."""
        if stop:
            self._stop()
        removals = {}
        roles = ("start", "run") if runs or stop else ("start",)
        for step in (s for s in self.plan.steps if s.role in roles):
            if step.remove_argv is not None:
                removals[step.node] = list(step.remove_argv)
        answers = self.nodes.run(removals, STEP_TIMEOUT)
        if not quiet:
            for node, (code, output) in answers.items():
                if code != 0 and "No such container" not in output:
                    self.say(f"{node}: removing the preflight's container failed: {tail(output)}")
            self.phase("cleanup")

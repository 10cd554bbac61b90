"""Ctrl-C on the launcher stops every rank on every node, for real: the rehearsal's
launch.sh (the bundle's script, made from the same plan for these containers) runs
DeepSpeed's runner with pdsh, or torchrun on every node, in its own process group
as a terminal's foreground job; SIGINT goes to that group, as Ctrl-C sends it, and
afterwards no rank process may be left in any node's container."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from builder.engine import connect
from builder.errors import NotInEngine
from builder.rehearse.report import MARK
from builder.rehearse.run import Rehearsal, rehearsal_of
from builder.rehearse.ssh import ranks_running
from builder.spec.loader import load_preset
from tests.integration.images import IMAGE

if TYPE_CHECKING:
    from pathlib import Path

    from builder.engine import Engine

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("clean")]

SLOTS = load_preset("cpu-deepspeed").spec.launch.slots
SLEEPER = """\
import os, time
print(f"rank {os.environ['RANK']} runs on {os.uname().nodename}", flush=True)
time.sleep(3600)
"""


def ranks(engine: Engine, container: str, script: str) -> int:
    """How many ranks run script in container (0 once the container is gone)."""
    try:
        running = engine.container_state(container) == "running"
    except NotInEngine:
        return 0
    return ranks_running(engine, container, script) if running else 0


def foreground(script: Path, *args: str) -> subprocess.Popen[str]:
    """`sh script args` as a terminal's foreground job: its own process group, SIGINT on."""
    return subprocess.Popen(
        ["sh", str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def every_rank_runs(engine: Engine, containers: list[str], script: str) -> None:
    deadline = time.monotonic() + 120
    while not all(ranks(engine, c, script) == SLOTS for c in containers):
        if time.monotonic() > deadline:
            pytest.fail(f"not every node runs its {SLOTS} ranks within 120 s")
        time.sleep(0.5)


def sleeping(tmp_path: Path, launcher: str) -> tuple[Rehearsal, str]:
    """A 2-node rehearsal of a script whose ranks run until stopped, and the script's path
    in the containers."""
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    rehearsal = Rehearsal(
        rehearsal_of(load_preset("cpu-deepspeed").spec, launcher),
        image=IMAGE,
        engine=connect(),
        nodes=2,
        script=str(script),
    )
    return rehearsal, script.name  # copied into the shared code folder, run from there


def test_ctrl_c_on_the_deepspeed_launcher_stops_every_rank_on_every_node(
    tmp_path: Path,
) -> None:
    rehearsal, script = sleeping(tmp_path, "deepspeed")
    engine = rehearsal.session.engine
    with rehearsal:
        rehearsal.up()
        assert rehearsal.outcome.ok, [f.text() for f in rehearsal.outcome.faults]
        containers = [node.container for node in rehearsal.session.nodes]
        launch = foreground(rehearsal.script, "launch")
        every_rank_runs(engine, containers, script)
        os.killpg(launch.pid, signal.SIGINT)  # Ctrl-C
        output, _ = launch.communicate(timeout=60)
        assert "stop: the launcher has ended" in output, output
        # sshd's containers stay up for the next run; no rank is left in any
        assert [engine.exit_code(c) for c in containers] == [None, None]
        assert [ranks(engine, c, script) for c in containers] == [0, 0], output


def test_ctrl_c_on_the_first_nodes_torchrun_stops_every_rank_on_every_node(
    tmp_path: Path,
) -> None:
    """torchrun runs on every node (`sh launch.sh NODE` on each); Ctrl-C on the first
    node's, which holds the c10d rendezvous, stops its ranks, and the others' agents stop
    theirs when the rendezvous goes (torchrun's own behaviour: a node's agent does not
    notice a peer that left while its ranks run; README, "Stopping a run")."""
    rehearsal, script = sleeping(tmp_path, "torchrun")
    engine = rehearsal.session.engine
    with rehearsal:
        rehearsal.prepare()
        assert rehearsal.outcome.ok, [f.text() for f in rehearsal.outcome.faults]
        nodes = rehearsal.session.nodes
        runs = [foreground(rehearsal.script, node.name) for node in nodes]
        containers = [node.container for node in nodes]
        every_rank_runs(engine, containers, script)
        os.killpg(runs[0].pid, signal.SIGINT)  # Ctrl-C on node1's launch.sh
        outputs = [run.communicate(timeout=90)[0] for run in runs]
        assert [ranks(engine, c, script) for c in containers] == [0, 0], outputs
        # node2's launch.sh had no signal: torchrun there ended when the rendezvous went
        assert runs[1].returncode not in (None, 0), outputs[1]


def in_shell(rehearsal: Rehearsal, arm: str) -> subprocess.CompletedProcess[str]:
    """`sh launch.sh ARM` (the rehearsal's launch.sh) as a person runs it on a node."""
    return subprocess.run(
        ["sh", str(rehearsal.script), arm], capture_output=True, text=True, check=False, timeout=300
    )


def names() -> set[str]:
    """The names of every container in the engine, running or not."""
    listed = subprocess.run(
        ["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True, check=True
    )
    return set(listed.stdout.split())


def test_a_run_taken_down_launches_again_from_launch_sh() -> None:
    """launch.sh's own arms, for real: after a deepspeed run, a node's container is still
    there and `sh launch.sh NODE` refuses to start it again, naming the way out; `sh
    launch.sh down` removes the run's containers (nothing else of the engine); then the
    nodes start again from launch.sh and `sh launch.sh launch` runs the job again."""
    rehearsal = Rehearsal(
        rehearsal_of(load_preset("cpu-deepspeed").spec, "deepspeed"),
        image=IMAGE,
        engine=connect(),
        nodes=2,
    )
    engine = rehearsal.session.engine
    with rehearsal:
        rehearsal.up()
        first = rehearsal.job()
        assert first.ok, [f.text() for f in first.faults]
        containers = [node.container for node in rehearsal.session.nodes]
        others = names()
        again = in_shell(rehearsal, "node1")
        assert again.returncode == 1
        assert "left by an earlier run: sh launch.sh down removes it" in again.stderr
        down = in_shell(rehearsal, "down")
        assert down.returncode == 0, down.stderr
        assert [ranks(engine, c, "probe.py") for c in containers] == [0, 0]
        assert names() == others - set(containers)  # nothing else went
        for node in rehearsal.session.nodes:
            started = in_shell(rehearsal, node.name)
            assert started.returncode == 0, started.stderr
        deadline = time.monotonic() + 60
        while not all(engine.exec(c, ["test", "-e", "/run/sshd.pid"])[0] == 0 for c in containers):
            assert time.monotonic() < deadline, "sshd did not start again within 60 s"
            time.sleep(0.2)
        run = in_shell(rehearsal, "launch")
        assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
        reports = [line for line in run.stdout.splitlines() if MARK in line]
        assert len(reports) == 2 * SLOTS, run.stdout[-3000:]

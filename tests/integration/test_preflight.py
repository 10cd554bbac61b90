"""builder preflight on real containers: a rehearsal cluster over gloo that passes; a
node throttled with docker's --cpus, a node whose link is shaped with tc, and a
node whose packages drifted, each named; and the real-cluster path (this machine's
ssh, the probe's launch.sh, DeepSpeed over pdsh) on nodes that are containers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from builder.cluster.ssh import Ssh
from builder.engine import connect
from builder.preflight.probe import Settings
from builder.preflight.rehearsal import RehearsedPreflight
from builder.rehearse.run import Rehearsal, rehearsal_of
from builder.rehearse.ssh import ranks_running
from builder.resolved import resolve
from builder.schedulers.ssh.preflight import ClusterPreflight
from builder.spec.loader import load_preset, load_stack
from builder.spec.records import Mount
from tests.conftest import real_tool
from tests.integration.conftest import install_wheel
from tests.integration.images import IMAGE

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from builder.preflight.report import Preflight
    from builder.rehearse.session import Session
    from builder.spec.records import Spec

# rates are judged here: no build of the shared images may run beside these tests
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("quiet_machine")]

BUILDER = Path(sys.executable).with_name("builder")
PRESETS = Path(__file__).parents[2] / "builder" / "spec" / "presets"
QUICK = Settings(quick=True)
LENIENT = Settings(quick=True, threshold=0.75)
"""For tests of something else than rates: containers on one machine's two cores vary
by a third in matmul, copy and link rates from run to run; the straggler tests make
their node slower than that."""
NODES_VIEW = "/srv/run"
"""Where the ssh nodes also see the shared folder: a path this machine does not have."""


def one_slot() -> Spec:
    """cpu-deepspeed with one rank per node: two nodes' ranks fit this machine's two
    cores, so their rates are comparable (more ranks than cores are warnings)."""
    spec = load_preset("cpu-deepspeed").spec
    return replace(spec, launch=replace(spec.launch, slots=1))


def preflight(
    spec: Spec, between: Callable[[RehearsedPreflight], None], settings: Settings = QUICK
) -> Preflight:
    with RehearsedPreflight(
        resolve(spec), image=IMAGE, engine=connect(), nodes=2, settings=settings
    ) as run:
        run.up()
        between(run)
        return run.job()


def failed(result: Preflight) -> list[tuple[str | None, str]]:
    return [(f.node, f.what) for f in result.findings if f.severity == "fail"]


@pytest.mark.usefixtures("clean")
def test_preflight_passes_on_a_rehearsal_cluster() -> None:
    argv = [str(BUILDER), "preflight", "--preset", "cpu-deepspeed", "--image", IMAGE]
    done = subprocess.run(
        [*argv, "--rehearse", "--quick", "--json"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    envelope = json.loads(done.stdout)
    assert envelope["ok"]
    assert envelope["schema"] == 1
    data = envelope["result"]
    assert data["ok"]
    assert data["schema"] == 1
    assert [row["node"] for row in data["nodes"]] == ["node1", "node2"]
    assert all(row["ranks"] == 2 and not row["problems"] for row in data["nodes"])
    assert len({row["digest"] for row in data["nodes"]}) == 1
    assert all(row["tflops"] > 0 and row["out_gbps"] > 0 for row in data["nodes"])
    assert {"world", "inter", "intra"} <= set(data["allreduce"])
    assert all(point["busbw"] > 0 for point in data["allreduce"]["world"])
    # 4 ranks on 2 cores: said, not judged
    assert any("share this machine" in f["what"] for f in data["findings"])
    assert data["phases"]["teardown"] > 0


@pytest.mark.usefixtures("clean")
def test_a_throttled_node_is_named_as_the_straggler() -> None:
    def throttle(run: RehearsedPreflight) -> None:
        node = run.nodes[1].container
        subprocess.run(["docker", "update", "--cpus", "0.3", node], check=True, capture_output=True)

    result = preflight(one_slot(), throttle)
    named = failed(result)
    assert ("node2", next(what for node, what in named if "matmul" in what)) in named, named
    assert {node for node, _ in named} == {"node2"}, named


@pytest.mark.usefixtures("clean")
def test_a_node_with_a_slow_link_is_named() -> None:
    real_tool("nsenter")
    real_tool("tc")

    def shape(run: RehearsedPreflight) -> None:
        # netem is not in this kernel; tbf limits what node2 sends, in its own namespace
        node = run.nodes[1].container
        pid = subprocess.run(
            ["docker", "inspect", "--format", "{{.State.Pid}}", node],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        subprocess.run(
            [
                "nsenter",
                "-t",
                pid,
                "-n",
                "tc",
                "qdisc",
                "add",
                "dev",
                "eth0",
                "root",
                "tbf",
                "rate",
                "20mbit",
                "burst",
                "32kbit",
                "latency",
                "400ms",
            ],
            check=True,
            capture_output=True,
        )

    result = preflight(one_slot(), shape)
    named = failed(result)
    links = [(node, what) for node, what in named if what.startswith("link")]
    assert [node for node, _ in links] == ["node2"], named
    assert "slow sending to node1" in links[0][1]
    row = next(row for row in result.nodes if row.node == "node2")
    assert row.out_gbps is not None
    assert row.out_gbps < 0.01  # 20 Mbit/s is 0.0025 GB/s


@pytest.mark.usefixtures("clean")
def test_a_node_whose_packages_drifted_is_named(other_einops: Path) -> None:
    def drift(run: RehearsedPreflight) -> None:
        install_wheel(run.nodes[1].container, other_einops)

    result = preflight(one_slot(), drift, LENIENT)
    named = failed(result)
    drifted = [what for node, what in named if "environment differs" in what]
    assert drifted == ["environment differs: python package einops 0.8.1 (on node1: 0.8.2)"]
    assert {node for node, _ in named} == {"node2"}
    assert len({row.digest for row in result.nodes}) == 2


@dataclass(frozen=True)
class SshNodes:
    """Nodes that are containers with sshd, the image as their environment (runtime
    none) and a shared folder at the same path on each (and also at NODES_VIEW, as
    nodes that mount a share elsewhere than this machine), reached from here by ssh."""

    spec: Spec
    stack: Path
    shared: Path
    config: Path
    session: Session


@pytest.fixture
def ssh_nodes(tmp_path: Path, clean: None) -> Iterator[SshNodes]:
    real_tool("ssh")
    shared = tmp_path / "shared"
    shared.mkdir()
    spec = one_slot()
    mounts = (Mount(str(shared), str(shared)), Mount(str(shared), NODES_VIEW))
    hosts = replace(spec, launch=replace(spec.launch, mounts=mounts))
    with Rehearsal(rehearsal_of(hosts, "deepspeed"), image=IMAGE, engine=connect(), nodes=2) as up:
        up.up()
        session = up.session
        config = tmp_path / "ssh_config"
        addresses = "".join(
            f"Host {node.name}\n    HostName "
            f"{session.engine.container_ip(node.container, session.network)}\n"
            for node in session.nodes
        )
        config.write_text(addresses + (session.folder / "ssh_config").read_text())
        # the stack as a user writes it: the preset's, on these nodes, the image as the nodes
        data = yaml.safe_load((PRESETS / "cpu-deepspeed.yaml").read_text())
        launch = data["launch"]
        launch.update(runtime="none", nodes=["node1", "node2"], slots=1)
        launch["env"] = {**launch.get("env", {}), "OMP_NUM_THREADS": "1"}
        launch.pop("code", None)
        launch.pop("cache", None)
        stack = tmp_path / "stack.yaml"
        stack.write_text(yaml.safe_dump(data))
        yield SshNodes(load_stack(stack, None).spec, stack, shared, config, session)


def test_preflight_reaches_real_nodes_over_ssh(ssh_nodes: SshNodes) -> None:
    """The real-cluster path: this machine's ssh, the probe's launch.sh, DeepSpeed there
    and pdsh to the rest; the nodes see the folder at another path than this machine
    (--node-dir), and run everything from there."""
    here = ssh_nodes.shared / "cluster"
    run = ClusterPreflight(
        resolve(ssh_nodes.spec),
        image=IMAGE,
        cluster_dir=here,
        node_dir=f"{NODES_VIEW}/cluster",
        settings=LENIENT,
        ssh=Ssh(ssh_nodes.config),
        engine=connect,
    )
    result = run.run()
    assert failed(result) == [], [f.text() for f in result.findings]
    assert [(row.node, row.ranks) for row in result.nodes] == [("node1", 1), ("node2", 1)]
    script = (here / "preflight" / "launch.sh").read_text()
    assert f"cluster={NODES_VIEW}/cluster\n" in script
    assert str(ssh_nodes.shared) not in script  # nothing of this machine's path
    assert result.settings["where"] == f"{NODES_VIEW}/cluster"
    # the architecture check ran against the real nodes (uname -m), before anything started
    assert [name for name, _ in result.phases] == [
        "nodes reached",
        "architectures checked",
        "job",
        "cleanup",
    ]


def test_ctrl_c_stops_the_probe_on_every_node(ssh_nodes: SshNodes) -> None:
    session = ssh_nodes.session
    script = f"{ssh_nodes.shared}/cluster/preflight/preflight.py"
    argv = [
        str(BUILDER),
        "preflight",
        str(ssh_nodes.stack),
        "--image",
        IMAGE,
        "--cluster-dir",
        str(ssh_nodes.shared / "cluster"),
        "--ssh-config",
        str(ssh_nodes.config),
        "--budget",
        "60",
    ]
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as cli:
        deadline = time.monotonic() + 90
        while not all(ranks_running(session.engine, n.container, script) for n in session.nodes):
            assert cli.poll() is None, cli.communicate()
            assert time.monotonic() < deadline, "the probe never ran on every node"
            time.sleep(0.5)
        os.killpg(cli.pid, signal.SIGINT)  # Ctrl-C in a terminal reaches the whole group
        _, err = cli.communicate(timeout=120)
    assert cli.returncode == 130, err[-2000:]
    assert "interrupted" in err
    deadline = time.monotonic() + 30
    while any(ranks_running(session.engine, n.container, script) for n in session.nodes):
        assert time.monotonic() < deadline, "a rank still runs 30 s after Ctrl-C"
        time.sleep(0.5)

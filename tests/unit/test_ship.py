"""builder ship's pure logic: what a node's `docker image inspect` answer means, the
states, and what the CLI refuses before it reaches any node (the real transfer is in
tests/integration/test_ship.py)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.cluster.ssh import Nodes, Ssh
from builder.engine import ship
from builder.engine.ship import NodeImage, Shipment, check_images, node_ids
from builder.errors import NotInEngine, WrongArchitecture

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

ID = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64


class Answers(Nodes):  # what check_images makes of the Ssh it is given
    """Nodes whose commands answer from a table (no ssh)."""

    def __init__(self, answers: Mapping[str, tuple[int | None, str]]) -> None:
        super().__init__(Ssh(), lambda _: None)
        self.answers = answers
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    def run(
        self, commands: Mapping[str, Sequence[str]], timeout: float, *, tty: bool = False
    ) -> dict[str, tuple[int | None, str]]:
        del timeout, tty
        self.asked += [(node, tuple(command)) for node, command in commands.items()]
        if all(tuple(c) == ("true",) for c in commands.values()):
            return dict.fromkeys(commands, (0, ""))
        return {node: self.answers[node] for node in commands}


class Engine:
    """This machine's engine: name:tag of one architecture (amd64 unless told), or of
    several (name:tag-ARCH each, their ids ID-like per architecture)."""

    def __init__(self, *architectures: str) -> None:
        self.architectures = architectures or ("amd64",)
        self.saved: list[str] = []

    def image(self, reference: str) -> Any:
        name, _, suffix = reference.rpartition("-")
        several = len(self.architectures) > 1
        if several and name and suffix in self.architectures:
            return type("Info", (), {"id": arch_id(suffix), "architecture": suffix})
        if reference.endswith(("-amd64", "-arm64")):
            raise NotInEngine(f"no image {reference}")
        first = self.architectures[0]
        return type("Info", (), {"id": arch_id(first) if several else ID, "architecture": first})


def arch_id(architecture: str) -> str:
    return ID if architecture == "amd64" else "sha256:" + "c" * 64


def test_a_nodes_answer_becomes_its_state(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = Answers(
        {
            "a": (0, ID + "\n"),
            "b": (0, OTHER + "\n"),
            "c": (1, "Error: No such image: t:1\n"),
            "d": (1, "Cannot connect to the Docker daemon at unix:///x.sock\n"),
            "e": (None, ""),
            "f": (127, "bash: docker: command not found\n"),
        }
    )
    monkeypatch.setattr(ship, "Nodes", lambda *_: nodes)
    found = check_images(cast("Any", Engine()), "t:1", list("abcdef"))
    states = {row.node: row.state for row in found.nodes}
    assert states == {
        "a": "there",
        "b": "differs",
        "c": "missing",
        "d": "failed",
        "e": "failed",
        "f": "failed",
    }
    assert not found.ok
    problems = "\n".join(found.problems())
    assert "Cannot connect to the Docker daemon" in problems
    assert "command not found" in problems
    assert "did not answer in time" in problems
    assert OTHER in problems
    assert not any(line.startswith("a:") for line in found.problems())
    # the reference reaches the node as one argv word, through ssh's quoting
    inspect = next(
        command for _, command in nodes.asked if command[:3] == ("docker", "image", "inspect")
    )
    assert inspect[-1] == "t:1"


def test_node_ids_take_the_last_line() -> None:
    nodes = Answers({"a": (0, "Warning: something\n" + ID + "\n")})
    assert node_ids(nodes, ["a"], "t:1") == {"a": ID}


def test_a_shipment_is_ok_only_when_every_node_has_the_image() -> None:
    rows = (NodeImage("a", "there", ID), NodeImage("b", "sent", ID, 3.0))
    assert Shipment("t:1", ID, rows).ok
    assert Shipment("t:1", ID, rows).failed == ()
    late = (*rows, NodeImage("c", "failed", None, detail="x"), NodeImage("d", "absent", None))
    assert Shipment("t:1", ID, late).failed == ("c", "d")
    assert Shipment("t:1", ID, (*rows, NodeImage("c", "failed", None, detail="x"))).problems() == [
        "c: x"
    ]
    data = Shipment("t:1", ID, rows, 10, 1.234).as_data()
    assert data["ok"] is True
    assert data["seconds"] == 1.23


@pytest.mark.parametrize(
    ("launch", "argv", "says"),
    [
        ("runtime: apptainer", [], "launch.sif"),
        ("runtime: none", [], "their own environment"),
        ("runtime: docker", ["--image", "t@sha256:" + "a" * 64], "name:tag"),
        ("runtime: docker", ["--check", "--force"], "--check"),
        ("runtime: docker", ["--ssh-config", "/nonexistent/x"], "no such file"),
        ("runtime: docker", ["--image", "t:1\n; id"], "--image"),
    ],
)
def test_ship_refuses_before_reaching_a_node(
    tmp_path: Path, launch: str, argv: list[str], says: str
) -> None:
    spec = tmp_path / "stack.yaml"
    spec.write_text(
        "name: s\nimage:\n  base: debian:bookworm\n  accelerator: cpu\n  torch: '2.13.0'\n"
        f"launch:\n  launcher: torchrun\n  {launch}\n"
    )
    result = CliRunner().invoke(app, ["ship", str(spec), *argv])
    assert result.exit_code == 2, result.output
    assert says in result.output


FAKE_SSH = """#!/usr/bin/env python3
import os, sys, time
node, command = sys.argv[-2], sys.argv[-1]
state = os.path.join(os.environ["SHIP_STATE"], node)
if command == "true":
    sys.exit(0)
if command.startswith("docker image inspect"):
    if os.path.exists(state):
        print(open(state).read())
        sys.exit(0)
    print("Error: No such image: t:1")
    sys.exit(1)
if command == "uname -m":
    print({"arm": "aarch64", "x86": "x86_64"}.get(node, ""))
    sys.exit(0)
if command.startswith("docker tag"):
    open(state + ".tags", "a").write(command + chr(10))
    sys.exit(0)
if command == "docker load":
    if node == "slow":  # takes nothing of the stream, and does not end by itself
        time.sleep(60)
        sys.exit(1)
    data = sys.stdin.buffer.read()
    ids = {"t:1-arm64": "sha256:" + "c" * 64}
    image = data[:65536].rstrip(b"x").decode()
    loaded = ids.get(image, "sha256:" + "a" * 64)
    open(state, "w").write(loaded if len(data) == 50 * 65536 else "short")
    print("Loaded image: " + image)
"""


@pytest.fixture
def fake_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ssh is FAKE_SSH, whose nodes keep what they loaded in the folder returned."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "state").mkdir()
    fake = tmp_path / "bin" / "ssh"
    fake.write_text(FAKE_SSH)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("SHIP_STATE", str(tmp_path / "state"))
    return tmp_path / "state"


class Saving(Engine):
    def save(self, reference: str) -> Any:
        self.saved.append(reference)
        for _ in range(50):
            yield reference.encode().ljust(65536, b"x")


@pytest.mark.usefixtures("fake_ssh")
def test_a_node_that_stops_reading_is_given_up_and_the_others_get_the_image(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ship, "STALL_TIMEOUT", 1.0)
    found = ship.ship_image(cast("Any", Saving()), "t:1", ["fast", "slow", "fast"])
    rows = {row.node: row for row in found.nodes}
    assert list(rows) == ["fast", "slow"]  # a node named twice gets it once
    assert rows["fast"].state == "sent"
    assert rows["slow"].state == "failed"
    assert "took nothing of the image for 1 s" in rows["slow"].detail
    assert found.sent_bytes == 50 * 65536


def test_each_node_gets_the_image_of_its_own_architecture(fake_ssh: Path) -> None:
    engine = Saving("amd64", "arm64")
    found = ship.ship_image(cast("Any", engine), "t:1", ["x86", "arm"])
    rows = {row.node: row for row in found.nodes}
    assert [rows["x86"].state, rows["arm"].state] == ["sent", "sent"]
    assert (rows["x86"].image_id, rows["arm"].image_id) == (ID, arch_id("arm64"))
    assert sorted(engine.saved) == ["t:1-amd64", "t:1-arm64"]
    # loaded as name:tag-ARCH, then tagged name:tag there: what the plan runs
    assert (fake_ssh / "arm.tags").read_text() == "docker tag t:1-arm64 t:1\n"


def test_a_node_no_built_architecture_fits_stops_the_ship_before_anything_is_sent(
    fake_ssh: Path,
) -> None:
    engine = Saving("amd64")
    with pytest.raises(WrongArchitecture) as refused:
        ship.ship_image(cast("Any", engine), "t:1", ["x86", "arm"])
    assert refused.value.nodes == ("arm",)
    assert "arm (linux/arm64): t:1 is built for linux/amd64 only" in str(refused.value)
    assert "Add linux/arm64 to image.platforms" in str(refused.value)
    assert engine.saved == []
    assert not list(fake_ssh.iterdir())

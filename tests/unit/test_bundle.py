"""`builder bundle`: every file a run needs in one folder; the key survives rewrites."""

from __future__ import annotations

import json
import stat
import subprocess
from typing import TYPE_CHECKING

from typer.testing import CliRunner

from builder.cli import app
from tests.conftest import real_tool

if TYPE_CHECKING:
    from pathlib import Path


def bundle(folder: Path, *extra: str) -> None:
    result = CliRunner().invoke(
        app, ["bundle", "--preset", "cpu-deepspeed", "-o", str(folder), *extra]
    )
    assert result.exit_code == 0, result.stderr


def test_the_bundle_holds_everything(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    bundle(folder)
    assert sorted(p.name for p in folder.iterdir()) == [
        ".deepspeed_env", "README.md", "authorized_keys", "hostfile", "id_ed25519",
        "id_ed25519.pub", "launch.sh", "plan.json", "ssh_config",
    ]  # fmt: skip
    assert (folder / "hostfile").read_text() == "node1 slots=2\nnode2 slots=2\n"
    assert (folder / ".deepspeed_env").read_text() == "GLOO_SOCKET_IFNAME=eth0\n"
    assert stat.S_IMODE((folder / "id_ed25519").stat().st_mode) == 0o600
    plan = json.loads((folder / "plan.json").read_text())
    assert [c["node"] for c in plan["commands"]] == ["node1", "node2", "node1"]


def test_the_key_is_kept_when_the_bundle_is_written_again(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    bundle(folder)
    key = (folder / "id_ed25519").read_text()
    bundle(folder, "--launcher", "torchrun", "--force")
    assert (folder / "id_ed25519").read_text() == key
    assert json.loads((folder / "plan.json").read_text())["launcher"] == "torchrun"


def test_launch_script_runs_one_node_and_passes_shellcheck(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    bundle(folder)
    script = folder / "launch.sh"
    subprocess.run([real_tool("shellcheck"), "--shell=sh", str(script)], check=True)
    usage = subprocess.run(["sh", str(script)], capture_output=True, text=True, check=False)
    assert usage.returncode == 2
    assert "usage: sh launch.sh {node1 | node2 | launch}" in usage.stderr
    # what node2 would run: exactly its own container start, taken from the plan
    trace = subprocess.run(
        ["sh", "-c", f'docker() {{ printf "%s\\n" "$*"; }}; . {script}', "launch.sh", "node2"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert len(trace) == 1
    assert trace[0].startswith("run --detach --name builder-cpu-deepspeed")


def test_launch_script_stops_when_the_bundle_is_not_on_the_node(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    bundle(folder)
    (folder / "hostfile").unlink()  # as on a node the folder was never copied to
    result = subprocess.run(
        ["sh", "-c", f"docker() {{ echo ran; }}; . {folder / 'launch.sh'}", "launch.sh", "node1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "ran" not in result.stdout
    assert f"{folder}/hostfile is missing on this node" in result.stderr

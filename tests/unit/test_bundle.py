"""`builder bundle`: every file a run needs in one folder; the key survives rewrites."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.errors import OutputExists
from builder.resolved import resolve
from builder.schedulers.ssh import write_bundle
from builder.spec.loader import load_preset
from builder.spec.presets import preset_text
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
        ".builder-written.json",
        ".deepspeed_env",
        "README.md",
        "authorized_keys",
        "hostfile",
        "id_ed25519",
        "id_ed25519.pub",
        "launch.sh",
        "node_ssh_config",
        "plan.json",
        "ssh_config",
        "ssh_host_ed25519_key",
        "ssh_host_ed25519_key.pub",
        "ssh_known_hosts",
    ]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "ssh_host_ed25519_key").stat().st_mode) == 0o600
    assert (folder / "node_ssh_config").read_text().count("\nHost node1 node2\n") == 1
    assert (folder / "hostfile").read_text() == "node1 slots=2\nnode2 slots=2\n"
    # launch.cache's variables too: ranks on a bare node get nothing else
    assert (folder / ".deepspeed_env").read_text() == (
        "GLOO_SOCKET_IFNAME=eth0\nHF_HOME=/shared/cache/huggingface\n"
        "TORCH_HOME=/shared/cache/torch\nTRITON_CACHE_DIR=/shared/cache/triton\n"
    )
    assert stat.S_IMODE((folder / "id_ed25519").stat().st_mode) == 0o600
    plan = json.loads((folder / "plan.json").read_text())
    assert [c["node"] for c in plan["commands"]] == ["node1", "node2", "node1"]


def test_the_key_is_kept_when_the_bundle_is_written_again(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    bundle(folder)
    key = (folder / "id_ed25519").read_text()
    host_key = (folder / "ssh_host_ed25519_key").read_text()
    bundle(folder, "--launcher", "torchrun")  # its own files: no --force
    assert (folder / "id_ed25519").read_text() == key
    assert (folder / "ssh_host_ed25519_key").read_text() == host_key
    assert json.loads((folder / "plan.json").read_text())["launcher"] == "torchrun"


NO_CONTAINER_YET = 'docker() { [ "$1" != container ] || return 1; printf "%s\\n" "$*"; }'
"""A docker that has no container yet (`docker container inspect` fails) and prints every
other command it is given."""


def test_launch_script_runs_one_node_and_passes_shellcheck(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    bundle(folder)
    script = folder / "launch.sh"
    subprocess.run([real_tool("shellcheck"), "--shell=sh", str(script)], check=True)
    usage = subprocess.run(["sh", str(script)], capture_output=True, text=True, check=False)
    assert usage.returncode == 2
    assert "usage: sh launch.sh {node1 | node2 | launch | stop | down}" in usage.stderr
    # what node2 would run: exactly its own container start, taken from the plan, once
    # the code and cache folders and the script are on the node
    code, cache = tmp_path / "code", tmp_path / "cache"
    folder = tmp_path / "shared"
    spec = load_preset("cpu-deepspeed").spec
    spec = replace(spec, launch=replace(spec.launch, code=str(code), cache=str(cache)))
    write_bundle(resolve(spec), folder, image="i:1", force=False)
    script = folder / "launch.sh"
    node2 = ["sh", "-c", f"{NO_CONTAINER_YET}; . {script}", str(script), "node2"]
    missing = subprocess.run(node2, capture_output=True, text=True, check=False)
    assert missing.returncode == 1
    hostname = socket.gethostname()
    assert f"{code} is missing on {hostname}" in missing.stderr
    assert missing.stdout == ""
    code.mkdir()
    cache.mkdir()
    missing = subprocess.run(node2, capture_output=True, text=True, check=False)
    assert f"{code}/train.py is missing on {hostname}" in missing.stderr
    (code / "train.py").write_text("")
    trace = subprocess.run(node2, capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(trace) == 1
    assert trace[0].startswith("run --detach --name builder-cpu-deepspeed")
    assert f"--volume {code}:/workspace --volume {cache}:{cache}" in trace[0]
    # a container an earlier run left: named, with the way out, and nothing started
    left = 'docker() { printf "%s\\n" "$*"; }'
    again = subprocess.run(
        ["sh", "-c", f"{left}; . {script}", str(script), "node2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 1
    assert "builder-cpu-deepspeed is already on" in again.stderr
    assert "sh launch.sh down removes it" in again.stderr
    assert "run --detach" not in again.stdout


FAKE_DOCKER = """#!/bin/sh
# `docker exec ... deepspeed ...`: a launcher that only SIGTERM ends (a background job
# of sh ignores SIGINT); `docker exec ... sh -c STOP ...`: the plan's stop, which finds
# it as the real one does (here through its pid file)
log=$FAKE_LOG
case "$*" in
    *" sh -c "*)
        for last; do :; done
        echo "stop: $1 $2 ... $last" >>"$log"
        if [ -n "${FAKE_STOP_FAILS:-}" ]; then exit 1; fi
        kill -TERM "$(cat "$log.pid")" ;;
    *deepspeed*)
        trap 'echo "launcher: TERM" >>"$log"; exit 7' TERM
        echo $$ >"$log.pid"
        while :; do sleep 0.1; done ;;
    *) echo "unexpected: $*" >>"$log"; exit 99 ;;
esac
"""


def start_launch(
    tmp_path: Path, **extra: str
) -> tuple[subprocess.Popen[str], Path, dict[str, str]]:
    """`sh launch.sh launch` of a bundle on this machine, with the fake docker, as a
    terminal's foreground job; returns once the (fake) launcher runs."""
    code, cache, folder = tmp_path / "code", tmp_path / "cache", tmp_path / "cluster"
    code.mkdir()
    cache.mkdir()
    (code / "train.py").write_text("")
    spec = load_preset("cpu-deepspeed").spec
    spec = replace(spec, launch=replace(spec.launch, code=str(code), cache=str(cache)))
    write_bundle(resolve(spec), folder, image="i:1", force=False)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "docker").write_text(FAKE_DOCKER)
    (fake / "docker").chmod(0o755)
    log = tmp_path / "log"
    env = {"PATH": f"{fake}:/usr/bin:/bin", "FAKE_LOG": str(log), **extra}
    launch = subprocess.Popen(
        ["sh", str(folder / "launch.sh"), "launch"],
        env=env,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        stderr=subprocess.PIPE,
        text=True,
    )
    pid_file = tmp_path / "log.pid"
    deadline = time.monotonic() + 20
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_file.exists(), "the launcher did not start"
    return launch, log, env


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "stop"])
def test_an_interrupted_launch_runs_the_stop_and_waits_for_the_launcher(
    tmp_path: Path, how: str
) -> None:
    """Ctrl-C (SIGINT to the terminal's process group), SIGTERM to launch.sh, or `sh
    launch.sh stop` from elsewhere: the plan's stop runs, and launch.sh ends only when the
    launcher has, with its exit code."""
    launch, log, env = start_launch(tmp_path)
    folder = tmp_path / "cluster"
    time.sleep(0.2)
    if how == "ctrl-c":
        os.killpg(launch.pid, signal.SIGINT)
    elif how == "sigterm":
        launch.send_signal(signal.SIGTERM)
    else:
        subprocess.run(["sh", str(folder / "launch.sh"), "stop"], env=env, check=True)
    _, stderr = launch.communicate(timeout=20)
    lines = log.read_text().splitlines()
    assert lines[-1] == "launcher: TERM", lines
    assert [line for line in lines if line.startswith("stop")] == [
        "stop: exec builder-cpu-deepspeed ... 30"
    ]
    assert launch.returncode == 7, stderr


def test_a_failed_stop_keeps_waiting_and_a_second_ctrl_c_gives_up(tmp_path: Path) -> None:
    """The stop fails (the launcher is stuck, the container gone): launch.sh says so and
    still waits; a second Ctrl-C ends it (130) and its command with it."""
    launch, log, _ = start_launch(tmp_path, FAKE_STOP_FAILS="1")
    os.killpg(launch.pid, signal.SIGINT)
    time.sleep(1)
    assert launch.poll() is None  # still waiting for the run
    os.killpg(launch.pid, signal.SIGINT)
    _, stderr = launch.communicate(timeout=20)
    assert launch.returncode == 130, stderr
    assert "the stop failed; run sh launch.sh stop again" in stderr
    assert "interrupted again" in stderr
    assert "launcher: TERM" in log.read_text()  # its command ended with it


def test_launch_script_stops_when_the_bundle_is_not_on_the_node(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    bundle(folder)
    (folder / "hostfile").unlink()  # as on a node the folder was never copied to
    result = subprocess.run(
        [
            "sh",
            "-c",
            f"docker() {{ echo ran; }}; . {folder / 'launch.sh'}",
            str(folder / "launch.sh"),
            "node1",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "ran" not in result.stdout
    assert f"{folder}/hostfile is missing on this node" in result.stderr


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    return {
        str(p.relative_to(root)): (p.lstat().st_mode, p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def test_a_bundle_of_an_older_builder_gets_a_host_key_and_keeps_its_login_key(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "cluster"
    bundle(folder)
    for name in ("ssh_host_ed25519_key", "ssh_host_ed25519_key.pub", "ssh_known_hosts"):
        (folder / name).unlink()
    key = (folder / "id_ed25519").read_text()
    bundle(folder)
    assert (folder / "id_ed25519").read_text() == key
    assert (folder / "ssh_known_hosts").read_text().startswith("builder-cluster ssh-ed25519 ")


def test_half_a_key_pair_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    folder.mkdir(mode=0o700)
    (folder / "authorized_keys").write_text("ssh-ed25519 AAAA old\n")
    before = snapshot(folder)
    result = CliRunner().invoke(app, ["bundle", "--preset", "cpu-deepspeed", "-o", str(folder)])
    assert result.exit_code == 2
    assert "half a key pair" in result.stderr
    assert "id_ed25519" in result.stderr
    assert snapshot(folder) == before


@pytest.mark.parametrize("mode", [0o755, 0o1777])
def test_an_open_folder_is_refused_and_its_mode_kept(tmp_path: Path, mode: int) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(mode)
    (folder / "keep").write_text("x")
    before = snapshot(folder)
    result = CliRunner().invoke(
        app, ["bundle", "--preset", "cpu-deepspeed", "-o", str(folder), "--force"]
    )
    assert result.exit_code == 2
    assert f"mode {mode:04o}" in result.stderr
    assert snapshot(folder) == before


def test_a_folder_where_a_file_goes_is_refused_with_force(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    (folder / "hostfile").mkdir(parents=True)
    folder.chmod(0o700)
    before = snapshot(folder)
    result = CliRunner().invoke(
        app, ["bundle", "--preset", "cpu-deepspeed", "-o", str(folder), "--force"]
    )
    assert result.exit_code == 2
    assert "hostfile is a folder" in result.stderr
    assert "Traceback" not in result.output
    assert snapshot(folder) == before


def test_a_refusal_for_one_file_writes_no_key(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    folder.mkdir(mode=0o700)
    (folder / "hostfile").write_text("mine slots=1\n")
    with pytest.raises(OutputExists):
        write_bundle(
            resolve(load_preset("cpu-deepspeed").spec), folder, image="demo:latest", force=False
        )
    assert sorted(p.name for p in folder.iterdir()) == ["hostfile"]


def test_secrets_travel_only_in_the_bundles_0600_files(tmp_path: Path) -> None:
    spec = load_preset("cpu-deepspeed").spec
    env = {**spec.launch.env, "HF_TOKEN": "hunter2", "NCCL_DEBUG": "INFO"}
    spec = replace(spec, launch=replace(spec.launch, env=env))
    folder = tmp_path / "cluster"
    write_bundle(resolve(spec), folder, image="t:1", force=False)
    for name in ("secrets.env", "secrets.sh"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
        assert "hunter2" in (folder / name).read_text()
    readable = [p for p in folder.iterdir() if stat.S_IMODE(p.stat().st_mode) & 0o044]
    assert readable, "the bundle has world-readable files to check"
    for path in readable:
        assert "hunter2" not in path.read_text(), path.name
    # launch.sh names the secret file among those a node must have before it starts
    assert "secrets.env" in (folder / "launch.sh").read_text().split("do\n", 1)[0]
    (folder / "secrets.env").unlink()
    result = subprocess.run(
        ["sh", str(folder / "launch.sh"), "node1"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1
    assert "secrets.env is missing on this node" in result.stderr


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stderr


def test_the_readmes_by_hand_sequence_works_in_order(tmp_path: Path) -> None:
    """hostfile -o makes the cluster folder (0700: keys accepts it), dsenv --set and
    bundle --set write the same .deepspeed_env, and the bundle keeps the keys `keys`
    made and rewrites nothing the earlier commands wrote from the same spec."""
    spec, folder = tmp_path / "stack.yaml", tmp_path / "cluster"
    assert cli("init", "--preset", "cpu-deepspeed", "-o", str(spec))[0] == 0
    assert cli("hostfile", str(spec), "-o", str(folder / "hostfile"))[0] == 0
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert cli("keys", str(spec), "--cluster-dir", str(folder)) == (0, cli_wrote(folder))
    key = (folder / "id_ed25519").read_text()
    setting = "NCCL_SOCKET_IFNAME=^docker0,lo"
    dsenv = ("dsenv", str(spec), "-o", str(folder / ".deepspeed_env"), "--set", setting)
    assert cli(*dsenv)[0] == 0
    code, stderr = cli("bundle", str(spec), "--cluster-dir", str(folder), "--set", setting)
    assert code == 0, stderr
    assert (folder / "id_ed25519").read_text() == key
    assert "NCCL_SOCKET_IFNAME=^docker0,lo\n" in (folder / ".deepspeed_env").read_text()
    readme = (folder / "README.md").read_text()
    for command in ("builder build", "builder push", "builder ship", "builder preflight"):
        assert f"`{command} {spec}" in readme, command
    assert "sh launch.sh launch" in readme


def cli_wrote(folder: Path) -> str:
    names = (
        "id_ed25519",
        "id_ed25519.pub",
        "authorized_keys",
        "ssh_host_ed25519_key",
        "ssh_host_ed25519_key.pub",
        "ssh_known_hosts",
        "ssh_config",
    )
    return "".join(f"wrote {folder / name}\n" for name in names)


def test_a_bundle_rewrites_its_own_files_after_a_change_to_the_stack(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    spec = load_preset("cpu-deepspeed").spec
    write_bundle(resolve(spec), folder, image="i:1", force=False)
    key = (folder / "id_ed25519").read_text()
    three = replace(spec, launch=replace(spec.launch, nodes=("n1", "n2", "n3")))
    write_bundle(resolve(three), folder, image="i:2", force=False)
    assert (folder / "hostfile").read_text() == "n1 slots=2\nn2 slots=2\nn3 slots=2\n"
    assert (folder / "id_ed25519").read_text() == key


@pytest.mark.parametrize("edited", ["hostfile", ".deepspeed_env", "launch.sh"])
def test_a_file_changed_by_hand_is_refused_naming_it_and_nothing_is_written(
    tmp_path: Path, edited: str
) -> None:
    folder = tmp_path / "cluster"
    bundle(folder)
    with (folder / edited).open("a") as handle:
        handle.write("mine=1\n")
    before = snapshot(folder)
    code, stderr = cli("bundle", "--preset", "cpu-deepspeed", "-o", str(folder), "--set", "A=1")
    assert code == 3
    assert f"{folder / edited} already exists with other content" in stderr
    assert "--force" in stderr
    assert snapshot(folder) == before
    bundle(folder, "--force")  # the fix the message names
    assert "mine=1" not in (folder / edited).read_text()


def test_the_files_of_another_stack_are_not_rewritten_without_force(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    bundle(folder)
    before = snapshot(folder)
    spec = load_preset("cpu-deepspeed").spec
    other = replace(spec, name="other", launch=replace(spec.launch, nodes=("x1",)))
    with pytest.raises(OutputExists, match="stack other"):
        write_bundle(resolve(other), folder, image="i:1", force=False)
    assert snapshot(folder) == before


def test_bundle_set_is_dsenv_set(tmp_path: Path) -> None:
    """The same parsing and the same refusals: a bad NAME, a secret."""
    folder = tmp_path / "cluster"
    for bad in ("NO-EQUALS", "1X=2", "HF_TOKEN=x"):
        from_dsenv = cli("dsenv", "--preset", "cpu-deepspeed", "--set", bad)
        from_bundle = cli("bundle", "--preset", "cpu-deepspeed", "-o", str(folder), "--set", bad)
        assert from_bundle == from_dsenv, bad
        assert from_bundle[0] == 2, bad
    assert not folder.exists()


def test_launch_sh_finds_its_folder_where_it_was_moved(tmp_path: Path) -> None:
    folder, moved = tmp_path / "here", tmp_path / "there" / "bundle"
    spec = load_preset("cpu-deepspeed").spec
    env = {**spec.launch.env, "HF_TOKEN": "x"}  # a secrets file named by its path too
    spec = replace(spec, launch=replace(spec.launch, code=None, cache=None, env=env))
    write_bundle(resolve(spec), folder, image="i:1", force=False)
    script = (folder / "launch.sh").read_text()
    assert str(folder) not in script
    subprocess.run([real_tool("shellcheck"), "--shell=sh", str(folder / "launch.sh")], check=True)
    moved.parent.mkdir()
    folder.rename(moved)
    trace = node1(moved / "launch.sh")
    assert trace.returncode == 0, trace.stderr
    assert f"--volume {moved}:/etc/builder/cluster:ro" in trace.stdout
    assert f"--env-file {moved}/secrets.env" in trace.stdout
    odd = tmp_path / "a:b"
    moved.rename(odd)
    refused = node1(odd / "launch.sh")
    assert refused.returncode == 1
    assert "holds ':' or ','" in refused.stderr
    assert refused.stdout == ""


def node1(script: Path) -> subprocess.CompletedProcess[str]:
    """`sh launch.sh node1` with a docker that prints what it is asked."""
    run = ["sh", "-c", f'{NO_CONTAINER_YET}; . "$0"', str(script), "node1"]
    return subprocess.run(run, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("command", ["hostfile", "dsenv", "slurm"])
def test_the_folder_a_command_makes_first_is_private(tmp_path: Path, command: str) -> None:
    """Whichever command makes the cluster folder makes it 0700; a folder that exists
    keeps its mode (a file without secrets is written into it as it is)."""
    args = {"hostfile": ["-w", "n1"], "slurm": ["--launcher", "torchrun"]}.get(command, [])
    preset = [] if command == "hostfile" else ["--preset", "cpu-deepspeed"]
    new = tmp_path / "new" / "cluster" / "out"
    assert cli(command, *preset, *args, "-o", str(new))[0] == 0
    assert stat.S_IMODE(new.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(new.parent.parent.stat().st_mode) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    assert cli(command, *preset, *args, "-o", str(shared / "out"))[0] == 0
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    # the keys still refuse it, as they did
    assert cli("keys", "--cluster-dir", str(shared))[0] == 2


def test_a_bundle_without_the_set_values_refuses_to_drop_them(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    bundle(folder, "--set", "NCCL_SOCKET_IFNAME=^docker0,lo")
    bundle(folder, "--set", "NCCL_SOCKET_IFNAME=^docker0,lo")  # the same: fine
    code, stderr = cli("bundle", "--preset", "cpu-deepspeed", "-o", str(folder))
    assert code == 3
    for name in (".deepspeed_env", "launch.sh", "plan.json"):  # each carries the value
        assert str(folder / name) in stderr
    assert "already exist with other content" in stderr
    assert "--set values are the run's" in stderr


@pytest.mark.parametrize(
    "command", [["launch"], ["preflight", "--dry-run"]], ids=["launch", "preflight-dry-run"]
)
def test_a_bundle_of_other_nodes_is_named_by_every_command_that_reads_both(
    tmp_path: Path, command: list[str]
) -> None:
    """A 3-node spec against a 2-node bundle: the plan is not printed as if they agreed."""
    folder = tmp_path / "cluster"
    two = tmp_path / "two.yaml"
    two.write_text(preset_text("cpu-deepspeed"))
    assert CliRunner().invoke(app, ["bundle", str(two), "-o", str(folder)]).exit_code == 0
    three = tmp_path / "three.yaml"
    three.write_text(two.read_text().replace("[node1, node2]", "[node1, node2, node3]"))
    result = CliRunner().invoke(app, [*command, str(three), "--cluster-dir", str(folder)])
    assert result.exit_code == 2
    assert f"{folder / 'hostfile'} does not match the spec" in result.stderr
    assert "node3 slots=2" in result.stderr
    same = CliRunner().invoke(app, [*command, str(two), "--cluster-dir", str(folder)])
    assert same.exit_code == 0, same.output

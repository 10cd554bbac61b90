"""The run's folder as the nodes see it (--node-dir): written, recorded and read back.

A bundle written here for nodes that see it elsewhere names that path in everything
the nodes run (plan.json's argv, the Slurm job) and in every command it prints
(README, next:), records it, and every later command that reads the folder (bundle
again, launch, slurm, preflight) uses the recorded path. launch.sh itself finds its
folder wherever it is, so it is the same whatever the path. The paths are read
back by their consumers: plan.json by json, the job script by bash -n, the README's
commands by shlex.
"""

from __future__ import annotations

import itertools
import json
import shlex
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.cluster.folder import RECORD, run_folder
from builder.errors import UsageError

NODES = "/shared/runs/demo"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def ok(*args: str) -> tuple[str, str]:
    code, out, err = run(*args)
    assert code == 0, err
    return out, err


def binds(plan: dict[str, object]) -> set[str]:
    """The cluster folder's side of every --volume in the plan's argv."""
    found = set()
    for command in plan["commands"]:  # type: ignore[attr-defined]
        argv = command["argv"]
        for flag, value in itertools.pairwise(argv):
            if flag == "--volume" and value.endswith(":/etc/builder/cluster:ro"):
                found.add(value.split(":")[0])
    return found


def test_a_bundle_for_nodes_elsewhere_names_their_path_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _, err = ok("bundle", "--preset", "cpu-deepspeed", "-o", "cluster", "--node-dir", NODES)
    plan = json.loads((tmp_path / "cluster" / "plan.json").read_text())
    assert binds(plan) == {NODES}
    assert str(tmp_path) not in json.dumps(plan)  # nothing of this machine's path
    nexts = [line.removeprefix("next: ") for line in err.splitlines() if "next: " in line]
    assert f"rsync -a cluster/ node1:{NODES}/" in nexts
    assert f"ssh node1 sh {NODES}/launch.sh launch" in nexts
    assert "note:" not in err  # the path was given: nothing to say about it
    # the README lives in the folder: what runs here names this machine's path of it
    # (wherever the README is read from), what the nodes read names theirs
    readme = (tmp_path / "cluster" / "README.md").read_text()
    here = tmp_path / "cluster"
    commands = [part for i, part in enumerate(readme.split("`")) if i % 2]
    assert f"rsync -a {here}/ node1:{NODES}/" in commands
    assert f"builder preflight --preset cpu-deepspeed --cluster-dir {here}" in commands
    again = f"builder bundle --preset cpu-deepspeed --cluster-dir {here} --node-dir {NODES}"
    assert again in commands
    assert f"Copy this folder to every node at {NODES}" in readme
    assert all(shlex.split(command) for command in commands)
    record = json.loads((tmp_path / "cluster" / RECORD).read_text())
    assert record["nodes"] == NODES


def test_launch_sh_is_the_same_wherever_the_nodes_see_the_folder(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    ok("bundle", "--preset", "cpu-deepspeed", "-o", str(first), "--node-dir", NODES)
    ok("bundle", "--preset", "cpu-deepspeed", "-o", str(second))
    assert (first / "launch.sh").read_text() == (second / "launch.sh").read_text()
    assert binds(json.loads((second / "plan.json").read_text())) == {str(second)}


def test_later_commands_read_the_recorded_path(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    ok("bundle", "--preset", "cpu-deepspeed", "-o", str(folder), "--node-dir", NODES)
    ok("bundle", "--preset", "cpu-deepspeed", "-o", str(folder))  # again, without it
    assert binds(json.loads((folder / "plan.json").read_text())) == {NODES}
    out, _ = ok("launch", "--preset", "cpu-deepspeed", "--cluster-dir", str(folder), "--json")
    assert binds(json.loads(out)["result"]) == {NODES}
    out, _ = ok("preflight", "--preset", "cpu-deepspeed", "--cluster-dir", str(folder), "--dry-run")
    assert f"--volume {NODES}:/etc/builder/cluster:ro" in out
    assert str(tmp_path) not in out
    script, _ = ok("slurm", "--preset", "cpu-deepspeed", "--cluster-dir", str(folder))
    assert f"{NODES}/logs" in script
    assert str(tmp_path) not in script
    # given again, it wins over the record
    other = "/lustre/other"
    out, _ = ok(
        "launch",
        "--preset",
        "cpu-deepspeed",
        "--cluster-dir",
        str(folder),
        "--node-dir",
        other,
        "--json",
    )
    assert binds(json.loads(out)["result"]) == {other}


def test_a_relative_folder_says_which_path_the_nodes_get(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _, err = ok("bundle", "--preset", "cpu-deepspeed", "-o", "cluster")
    assert "this machine's path of --cluster-dir cluster" in err
    assert "--node-dir PATH" in err
    assert "nodes" not in json.loads((tmp_path / "cluster" / RECORD).read_text())
    _, err = ok("bundle", "--preset", "cpu-deepspeed", "-o", str(tmp_path / "abs"))
    assert "note:" not in err


def test_a_slurm_folder_for_nodes_elsewhere(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    args = ("bundle", "--preset", "cpu-deepspeed", "--scheduler", "slurm", "-o", str(folder))
    _, err = ok(*args, "--node-dir", NODES)
    script = (folder / "job.sbatch").read_text()
    subprocess.run(["bash", "-n", str(folder / "job.sbatch")], check=True)
    assert f"LOGS={NODES}/logs/" in script
    assert f"--bind {NODES}:/etc/builder/cluster:ro" in script
    assert str(tmp_path) not in script
    assert f"next: sbatch {NODES}/job.sbatch" in err
    readme = (folder / "README.md").read_text()
    assert f"rsync -a {folder}/ LOGIN:{NODES}/" in readme
    assert f"`sbatch {NODES}/job.sbatch`" in readme


def test_the_slurm_probe_job_is_written_for_nodes_elsewhere(tmp_path: Path) -> None:
    folder = tmp_path / "probe"
    ok(
        "preflight",
        "--preset",
        "cpu-deepspeed",
        "--scheduler",
        "slurm",
        "--dry-run",
        "-o",
        str(folder),
        "--node-dir",
        NODES,
    )
    script = (folder / "job.sbatch").read_text()
    assert f"{NODES}/preflight" in script
    assert str(tmp_path) not in script
    assert f"sbatch --parsable --wait {NODES}/job.sbatch" in (folder / "README.md").read_text()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("runs/c", "absolute"),
        ("/shared/a:b", "':'"),
        ("/shared/a,b", "','"),
        ("/shared/a\nb", "'\\n'"),
        ("/shared/../c", "'..'"),
        ("/" + "x" * 256, "255"),
        ("/x" * 2100, "4096"),
    ],
)
def test_node_dir_is_checked_as_a_bind(value: str, says: str) -> None:
    with pytest.raises(UsageError, match="--node-dir") as caught:
        run_folder(Path("cluster"), value)
    assert says in str(caught.value)


def test_a_refusal_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    code, _, err = run("bundle", "--preset", "cpu-deepspeed", "-o", str(folder), "--node-dir", "x")
    assert code == 2
    assert "--node-dir" in err
    assert "Traceback" not in err
    assert not folder.exists()


def test_a_record_with_a_bad_path_is_no_record(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    folder.mkdir(mode=0o700)
    for bad in ("relative", "/a:b", 7, None):
        (folder / RECORD).write_text(json.dumps({"files": {}, "nodes": bad}))
        assert run_folder(folder).nodes == str(folder.resolve())
    (folder / RECORD).write_text("[not an object")
    assert run_folder(folder).nodes == str(folder.resolve())


def test_sites_whose_nodes_never_read_the_folder_refuse_it(tmp_path: Path) -> None:
    code, _, err = run(
        "bundle",
        "--preset",
        "cpu-deepspeed",
        "--scheduler",
        "kubernetes",
        "-o",
        str(tmp_path / "k"),
        "--node-dir",
        NODES,
    )
    assert code == 2
    assert "kubernetes" in err
    assert not (tmp_path / "k").exists()


def test_printed_commands_survive_both_shells_for_a_path_with_spaces(tmp_path: Path) -> None:
    folder, nodes = tmp_path / "my cluster", "/shared/my run"
    _, err = ok("bundle", "--preset", "cpu-deepspeed", "-o", str(folder), "--node-dir", nodes)
    lines = [line.removeprefix("next: ") for line in err.splitlines() if "next: " in line]
    copies = [shlex.split(line) for line in lines if line.startswith("rsync")]
    # -s: rsync hands the remote path to the node as one name, not to its shell
    assert copies[0] == ["rsync", "-as", f"{folder}/", f"node1:{nodes}/"]
    starts = [shlex.split(line) for line in lines if line.startswith("ssh")]
    # ssh joins what follows the host for the node's shell, which splits it again
    assert [shlex.split(" ".join(argv[2:])) for argv in starts] == [
        ["sh", f"{nodes}/launch.sh", "node1"],
        ["sh", f"{nodes}/launch.sh", "node2"],
        ["sh", f"{nodes}/launch.sh", "launch"],
    ]


def test_keys_made_again_keep_the_recorded_path(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    ok("bundle", "--preset", "cpu-deepspeed", "-o", str(folder), "--node-dir", NODES)
    ok("keys", "--preset", "cpu-deepspeed", "--cluster-dir", str(folder), "--force")
    assert json.loads((folder / RECORD).read_text())["nodes"] == NODES
    assert run_folder(folder).nodes == NODES


def test_a_slurm_folder_for_nodes_elsewhere_says_to_copy_it_before_sbatch(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    args = ("bundle", "--preset", "cpu-deepspeed", "--scheduler", "slurm", "-o", str(folder))
    _, err = ok(*args, "--node-dir", NODES)
    lines = [line.removeprefix("next: ") for line in err.splitlines() if "next: " in line]
    assert lines[-2] == (
        f"# first, from here to a machine of the cluster (LOGIN): rsync -a {folder}/ LOGIN:{NODES}/"
    )
    assert lines[-1] == f"sbatch {NODES}/job.sbatch"
    _, err = ok(*args[:-1], str(tmp_path / "here"))
    assert "# first" not in err  # the nodes see it where it is: nothing to copy


def test_the_probe_job_says_the_runs_claims_only_when_they_are_its_own(tmp_path: Path) -> None:
    args = ("preflight", "--preset", "cpu-deepspeed", "--scheduler", "kubernetes", "--dry-run")
    _, err = ok(*args, "-o", str(tmp_path / "a.yaml"))
    assert "# the run's claims first" in err
    spec = tmp_path / "stack.yaml"
    ok("init", "--preset", "cpu-deepspeed", "-o", str(spec))
    text = spec.read_text().replace(
        "launch:\n", "launch:\n  kubernetes: {code_claim: team-code, cache_claim: team-cache}\n", 1
    )
    spec.write_text(text)
    _, err = ok(args[0], str(spec), *args[3:], "-o", str(tmp_path / "b.yaml"))
    assert "# the run's claims first" not in err

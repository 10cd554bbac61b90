"""One command writes the whole folder of a run for any site (`builder bundle --scheduler
ssh|slurm|kubernetes`), every file its job file reads included, with a README of the next
commands; a command's --set values reach every rank on every site; and a new scheduler
(a throwaway PBS one here) is one module that the command reaches with nothing else
changed."""

from __future__ import annotations

import json
import shlex
import stat
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from typer.testing import CliRunner

import builder
import builder.schedulers
from builder import schedulers
from builder.cli import app
from tests.conftest import real_tool

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

VALUE = "mlx5_0:1,mlx5_1:1"
"""The ssh tutorial's `--set NCCL_IB_HCA=...`: it must reach every rank on every site."""
SECRET = "hf_0123456789abcdef"


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def spec_file(tmp_path: Path, launcher: str = "torchrun", **launch: Any) -> Path:
    """The cpu-deepspeed preset with launcher, a secret in launch.env and launch changes."""
    data = yaml.safe_load(builder.preset_text("cpu-deepspeed"))
    data["image"]["openmpi"] = launcher == "mpirun"
    data["launch"]["launcher"] = launcher
    data["launch"]["env"] = {**(data["launch"].get("env") or {}), "HF_TOKEN": SECRET}
    data["launch"].update(launch)
    path = tmp_path / "stack.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- every site's folder ---------------------------------------------------------------


def test_a_slurm_folder_holds_the_job_its_secrets_and_the_next_commands(tmp_path: Path) -> None:
    """The job reads secrets.sh on every node: the folder has it (0600), the job's node
    check looks for it, and the README says sbatch with the folder's own path."""
    folder = tmp_path / "run"
    code, _, stderr = cli(
        "bundle", str(spec_file(tmp_path)), "--scheduler", "slurm", "-o", str(folder)
    )
    assert code == 0, stderr
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        ".builder-written.json",
        "README.md",
        "job.sbatch",
        "secrets.env",
        "secrets.sh",
    ]
    assert mode(folder) == 0o700
    assert mode(folder / "secrets.sh") == 0o600
    assert SECRET in (folder / "secrets.sh").read_text()
    job = (folder / "job.sbatch").read_text()
    assert SECRET not in job
    assert str(folder.resolve() / "secrets.sh") in job  # the node check names it
    readme = (folder / "README.md").read_text()
    assert f"sbatch {folder.resolve()}/job.sbatch" in readme
    assert "scancel JOBID" in readme
    subprocess.run([real_tool("shellcheck"), str(folder / "job.sbatch")], check=True)
    # written again: the same folder, no --force needed
    again = cli("bundle", str(spec_file(tmp_path)), "--scheduler", "slurm", "-o", str(folder))
    assert again[0] == 0, again[2]


def test_the_node_check_of_a_slurm_job_stops_on_a_node_without_the_secrets(
    tmp_path: Path,
) -> None:
    """`builder slurm` alone writes no secrets: the job's node check names the missing
    file and the command that writes it, and the command says so on stderr."""
    folder = tmp_path / "c"
    script = tmp_path / "job.sbatch"
    for name in ("code", "cache"):
        (tmp_path / name).mkdir()
    (tmp_path / "code" / "train.py").write_text("")
    spec = spec_file(tmp_path, code=str(tmp_path / "code"), cache=str(tmp_path / "cache"))
    code, _, stderr = cli(
        "slurm", str(spec), "--runtime", "none", "--cluster-dir", str(folder), "-o", str(script)
    )
    assert code == 0, stderr
    assert "builder bundle --scheduler slurm" in stderr
    text = script.read_text()
    line = next(line for line in text.splitlines() if line.startswith("    bash -c"))
    check, _, _ = line.strip().rpartition(" -- ")
    run = subprocess.run(
        ["bash", "-c", f"{check} -- echo started"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 1
    assert f"{folder.resolve()}/secrets.sh is missing on" in run.stderr
    assert "builder bundle --scheduler slurm" in run.stderr


def test_a_kubernetes_folder_holds_the_manifests_the_secrets_and_the_next_commands(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "k8s"
    spec = spec_file(tmp_path)
    code, _, stderr = cli("bundle", str(spec), "--scheduler", "kubernetes", "-o", str(folder))
    assert code == 0, stderr
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        ".builder-written.json",
        "README.md",
        "kubernetes.secrets.yaml",
        "kubernetes.yaml",
    ]
    assert mode(folder / "kubernetes.secrets.yaml") == 0o600
    assert SECRET not in (folder / "kubernetes.yaml").read_text()
    readme = (folder / "README.md").read_text()
    assert "kubectl apply -f kubernetes.secrets.yaml -f kubernetes.yaml" in readme
    assert "End it (its pods on every node): `kubectl delete trainjob/" in readme
    assert "`kubectl delete -f kubernetes.yaml` removes" in readme
    assert "Kubeflow Trainer v2" in readme


def test_a_kubernetes_folder_keeps_its_cluster_host_key(tmp_path: Path) -> None:
    """An ssh launcher's pods pin the cluster host key: writing the folder again keeps it
    (the same bytes), --force makes a new one."""
    folder = tmp_path / "k8s"
    spec = str(spec_file(tmp_path, launcher="deepspeed"))
    assert cli("bundle", spec, "--scheduler", "kubernetes", "-o", str(folder))[0] == 0
    first = (folder / "kubernetes.secrets.yaml").read_text()
    assert "ssh-host" in first
    assert cli("bundle", spec, "--scheduler", "kubernetes", "-o", str(folder))[0] == 0
    assert (folder / "kubernetes.secrets.yaml").read_text() == first
    assert cli("bundle", spec, "--scheduler", "kubernetes", "-o", str(folder), "--force")[0] == 0
    assert (folder / "kubernetes.secrets.yaml").read_text() != first


def test_an_unknown_scheduler_is_named_with_the_choices(tmp_path: Path) -> None:
    code, _, stderr = cli("bundle", "--preset", "cpu-deepspeed", "--scheduler", "slurn")
    assert code == 2
    assert "--scheduler 'slurn'" in stderr
    assert "kubernetes, slurm, ssh" in stderr
    assert "did you mean 'slurm'?" in stderr
    assert not (tmp_path / "cluster").exists()


def test_a_refused_site_writes_nothing(tmp_path: Path) -> None:
    """A setting the site cannot carry (a node's interface in a pod) is refused before a
    file is written."""
    folder = tmp_path / "k8s"
    spec = str(spec_file(tmp_path, socket_ifname="ib0"))
    code, _, stderr = cli("bundle", spec, "--scheduler", "kubernetes", "-o", str(folder))
    assert code != 0
    assert "launch.socket_ifname" in stderr
    assert "host_network" in stderr
    assert not folder.exists()


# --- --set reaches every rank on every site --------------------------------------------


def _ssh(tmp_path: Path, launcher: str) -> dict[str, str]:
    folder = tmp_path / f"ssh-{launcher}"
    spec = str(spec_file(tmp_path, launcher=launcher))
    code, _, stderr = cli("bundle", spec, "-o", str(folder), "--set", f"NCCL_IB_HCA={VALUE}")
    assert code == 0, stderr
    plan = json.loads((folder / "plan.json").read_text())
    return {
        "argv": " ".join(" ".join(step["argv"]) for step in plan["commands"]),
        "launch.sh": (folder / "launch.sh").read_text(),
        ".deepspeed_env": (folder / ".deepspeed_env").read_text(),
    }


@pytest.mark.parametrize("launcher", ["torchrun", "deepspeed", "mpirun"])
def test_set_reaches_every_rank_of_an_ssh_run(tmp_path: Path, launcher: str) -> None:
    """In each node's container (docker run --env), hence every rank, and for DeepSpeed in
    .deepspeed_env too: a torchrun bundle carried it nowhere before."""
    files = _ssh(tmp_path, launcher)
    assert f"NCCL_IB_HCA={VALUE}" in files["argv"]
    assert f"NCCL_IB_HCA={VALUE}" in files["launch.sh"]
    if launcher == "deepspeed":
        assert f"NCCL_IB_HCA={VALUE}\n" in files[".deepspeed_env"]


@pytest.mark.parametrize("runtime", ["apptainer", "none", "pyxis"])
@pytest.mark.parametrize("launcher", ["torchrun", "deepspeed", "srun"])
def test_set_reaches_every_rank_of_a_slurm_job(tmp_path: Path, runtime: str, launcher: str) -> None:
    """The batch shell exports it; apptainer --cleanenv gets it back as APPTAINERENV_*,
    pyxis and bare nodes inherit the shell's environment."""
    spec = spec_file(tmp_path, launcher=launcher)
    folder = tmp_path / "run"
    code, _, stderr = cli(
        "bundle",
        str(spec),
        "--scheduler",
        "slurm",
        "--runtime",
        runtime,
        "--image",
        "registry.example.com/team/train:1",
        "-o",
        str(folder),
        "--set",
        f"NCCL_IB_HCA={VALUE}",
    )
    assert code == 0, stderr
    job = (folder / "job.sbatch").read_text()
    exported = [line for line in job.splitlines() if line.startswith("export ")]
    assert f"export NCCL_IB_HCA={shlex.quote(VALUE)}" in exported
    if runtime == "apptainer":  # --cleanenv drops the shell's environment: given back
        assert f"APPTAINERENV_NCCL_IB_HCA={shlex.quote(VALUE)}" in job


@pytest.mark.parametrize("job", ["trainjob", "pytorchjob"])
def test_set_reaches_every_pod(tmp_path: Path, job: str) -> None:
    out = tmp_path / "k8s.yaml"
    code, _, stderr = cli(
        "kubernetes",
        str(spec_file(tmp_path)),
        "--job",
        job,
        "-o",
        str(out),
        "--set",
        f"NCCL_IB_HCA={VALUE}",
    )
    assert code == 0, stderr
    objects = list(yaml.safe_load_all(out.read_text()))
    envs = [{e["name"]: e.get("value") for e in env} for env in _env_lists(objects)]
    assert envs
    assert all(env.get("NCCL_IB_HCA") == VALUE for env in envs)


def _env_lists(objects: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for obj in objects:
        if obj["kind"] == "TrainJob":
            yield obj["spec"]["trainer"]["env"]
        if obj["kind"] == "PyTorchJob":
            for replica in obj["spec"]["pytorchReplicaSpecs"].values():
                for container in replica["template"]["spec"]["containers"]:
                    yield container["env"]


@pytest.mark.parametrize(
    "command",
    [
        ["bundle"],
        ["bundle", "--scheduler", "slurm"],
        ["bundle", "--scheduler", "kubernetes"],
        ["slurm"],
        ["kubernetes"],
        ["launch"],
        ["dsenv"],
    ],
)
def test_a_secret_on_the_command_line_is_refused(tmp_path: Path, command: list[str]) -> None:
    out = tmp_path / "out"
    output = [] if command[0] == "launch" else ["-o", str(out)]
    code, stdout, stderr = cli(
        *command, "--preset", "cpu-deepspeed", "--set", f"HF_TOKEN={SECRET}", *output
    )
    assert code == 2, stderr
    assert "--set HF_TOKEN: a secret never goes on a command line" in stderr
    assert SECRET not in stdout + stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("PATH=/x", "PATH is managed by builder"),
        ("X=a\nb", "newline"),
        ("1X=a", "write it as NAME=VALUE"),
    ],
)
def test_set_values_are_checked_as_launch_env_is(item: str, message: str) -> None:
    code, _, stderr = cli("launch", "--preset", "cpu-deepspeed", "--set", item)
    assert code == 2
    assert message in stderr
    assert "Traceback" not in stderr


# --- a new scheduler is one module ------------------------------------------------------

PBS = '''
    """PBS Pro: a throwaway scheduler, one module, with options of its own (launch.pbs)."""
    import shlex
    from dataclasses import dataclass

    from builder.model import field
    from builder.output import OutputFile
    from builder.schedulers.base import Scheduler

    JOB = "job.pbs"

    @dataclass(frozen=True)
    class PbsOptions:
        """qsub's options."""

        queue: str = field("workq", pattern=r"[a-z]+", description="The queue (-q).")

    class Pbs(Scheduler):
        name = "pbs"
        batch = True
        started = "`qsub job.pbs`"
        stopped = "`qdel JOBID`"
        section = PbsOptions
        environment_files = (JOB,)

        def materialize(self, resolved, *, image, folder, force=False, spec_ref="x"):
            launch = resolved.spec.launch
            env = resolved.run_environment()
            lines = [
                "#!/bin/bash",
                f"#PBS -q {launch.section(PbsOptions).queue}",
                f"#PBS -l select={len(launch.nodes)}:ncpus={launch.slots}",
                *(f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())),
                f"pbsdsh -- {shlex.quote(image)}",
            ]
            return [
                OutputFile(JOB, 0o755, "\\n".join(lines) + "\\n"),
                OutputFile("README.md", 0o644, f"qsub {folder.nodes}/{JOB}\\n"),
            ]

    SCHEDULER = Pbs()
'''


@pytest.fixture
def pbs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    folder = tmp_path / "schedulers"
    folder.mkdir()
    (folder / "pbs.py").write_text(textwrap.dedent(PBS))
    package = builder.schedulers
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    caches = (schedulers.names, schedulers.get, schedulers.sections)
    for cached in caches:
        cached.cache_clear()
    yield
    for cached in caches:
        cached.cache_clear()
    sys.modules.pop("builder.schedulers.pbs", None)


@pytest.mark.usefixtures("pbs")
def test_a_new_scheduler_is_one_module_that_bundle_reaches(tmp_path: Path) -> None:
    assert "pbs" in schedulers.names()
    folder = tmp_path / "run"
    code, _, stderr = cli(
        "bundle",
        "--preset",
        "cpu-deepspeed",
        "--scheduler",
        "pbs",
        "-o",
        str(folder),
        "--set",
        f"NCCL_IB_HCA={VALUE}",
    )
    assert code == 0, stderr
    job = (folder / "job.pbs").read_text()
    assert "#PBS -q workq\n" in job  # its section's default
    assert "#PBS -l select=2:ncpus=2" in job
    assert f"export NCCL_IB_HCA={shlex.quote(VALUE)}" in job
    assert (folder / "README.md").read_text() == f"qsub {folder.resolve()}/job.pbs\n"
    record = json.loads((folder / ".builder-written.json").read_text())
    assert set(record["files"]) == {"README.md"}  # job.pbs carries the --set value


@pytest.mark.usefixtures("pbs")
def test_a_new_schedulers_section_is_part_of_the_spec(tmp_path: Path) -> None:
    """launch.pbs is read, checked, documented and refused like launch.slurm, with nothing
    in spec/ naming it; another site's command ignores it, and a site without a preflight
    says so."""
    folder = tmp_path / "run"
    spec = spec_file(tmp_path, pbs={"queue": "gpuq"})
    code, _, stderr = cli("bundle", str(spec), "--scheduler", "pbs", "-o", str(folder))
    assert code == 0, stderr
    assert "#PBS -q gpuq\n" in (folder / "job.pbs").read_text()
    code, _, stderr = cli("bundle", str(spec), "--scheduler", "pbs", "-o", str(tmp_path / "x"))
    assert code == 0, stderr
    code, schema, _ = cli("schema")
    assert json.loads(schema)["$defs"]["LaunchSpec"]["properties"]["pbs"] == {
        "$ref": "#/$defs/PbsOptions"
    }
    (tmp_path / "wrong").mkdir()
    wrong = spec_file(tmp_path / "wrong", pbs={"queue": "GPU Q", "queu": "x"})
    code, _, stderr = cli("bundle", str(wrong), "--scheduler", "pbs", "-o", str(tmp_path / "y"))
    assert code == 1, stderr  # a spec error
    assert "launch.pbs.queue" in stderr
    assert "launch.pbs.queu (line" in stderr
    assert "did you mean 'queue'" in stderr
    assert not (tmp_path / "y").exists()
    code, _, stderr = cli("preflight", str(spec), "--scheduler", "pbs")
    assert code == 2, stderr
    assert "--scheduler pbs has no preflight yet" in stderr


def test_a_name_launch_secret_lists_is_a_secret_on_the_command_line_too(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, secret=["WANDB_API"], env={"WANDB_API": "old"})
    code, stdout, stderr = cli("launch", str(spec), "--set", f"WANDB_API={SECRET}")
    assert code == 2
    assert "--set WANDB_API: a secret never goes on a command line" in stderr
    assert SECRET not in stdout + stderr

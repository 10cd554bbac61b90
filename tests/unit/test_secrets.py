"""Secret launch variables: never on a printed command line or in a readable file; the
0600 files that carry them read back exactly by docker's parser and by a real sh."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.cluster.dsenv import dsenv_for
from builder.errors import UsageError
from builder.launch.actions import ApptainerExec, ContainerStart, HostCommand
from builder.launch.plan import launch_plan
from builder.launch.secrets import (
    SECRETS_ENV,
    SECRETS_SH,
    is_secret_name,
    secret_files,
    secret_names,
)
from builder.output import write_files
from builder.resolved import resolve
from builder.schedulers.slurm.script import sbatch_script
from builder.schedulers.slurm.section import Slurm
from builder.schedulers.ssh import write_bundle
from builder.spec.loader import Stack, load_preset
from builder.spec.presets import preset_text

if TYPE_CHECKING:
    from pathlib import Path

    from builder.spec.records import Spec

SECRET = "hunter2"
# What docker's and sh's readers could mangle: blanks at both ends, quotes, $, #, =
AWKWARD = " p@ss w'o\"rd $HOME `x` #not-a-comment = ✓ "
ENV = {"HF_TOKEN": SECRET, "NCCL_DEBUG": "INFO", "DB": AWKWARD}


def with_env(preset: str, env: dict[str, str], secret: tuple[str, ...] = ("DB",)) -> Spec:
    spec = load_preset(preset).spec
    return replace(spec, launch=replace(spec.launch, env=env, secret=secret))


def docker_env_file(text: str) -> dict[str, str]:
    """docker/cli's opts.parseKeyValueFile: lines (a trailing CR dropped, as bufio's
    ScanLines does), leading blanks trimmed, '#' lines and blank lines skipped, split at
    the first '=', the value passed through untrimmed and unquoted."""
    out: dict[str, str] = {}
    for raw in text.split("\n"):
        line = raw.removesuffix("\r").lstrip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        assert sep, f"{line!r}: docker would take the value from its own environment"
        assert name, f"{line!r}: docker refuses a line without a name"
        assert not any(c.isspace() for c in name), f"docker refuses {name!r}"
        out[name] = value
    return out


def test_which_names_are_secret() -> None:
    for name in (
        "HF_TOKEN",
        "token",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "SMTP_PASSWD",
        "GCP_CREDENTIALS",
        "API_KEY",
        "WANDB_API_KEY",
    ):
        assert is_secret_name(name), name
    for name in ("NCCL_DEBUG", "KEYBOARD", "MASTER_ADDR", "HF_HOME", "TOKENIZERS_PARALLELISM"):
        assert not is_secret_name(name), name
    spec = with_env("cpu-deepspeed", ENV)
    assert secret_names(spec.launch) == {"HF_TOKEN", "DB"}


def test_no_plan_prints_a_secret_value() -> None:
    spec = with_env("cpu-deepspeed", ENV)
    for runtime, launcher in (
        ("docker", "deepspeed"),
        ("docker", "torchrun"),
        ("apptainer", "torchrun"),
        ("singularity", "torchrun"),
        ("none", "torchrun"),
        ("none", "deepspeed"),
    ):
        plan = launch_plan(
            resolve(spec, runtime_name=runtime, launcher_name=launcher),
            image="i:1",
            cluster_dir="/c",
        )
        shown = plan.text() + json.dumps(plan.as_data())
        assert SECRET not in shown, (runtime, launcher)
        assert "p@ss" not in shown, (runtime, launcher)
        if runtime != "none":  # (a bare node's environment is its own)
            assert "NCCL_DEBUG=INFO" in shown  # what is not secret still travels on argv
        for step in plan.steps:
            action = step.action
            if isinstance(action, ContainerStart):
                assert action.env_file == f"/c/{SECRETS_ENV}"
                assert "--env-file" in step.argv
            elif isinstance(action, ApptainerExec | HostCommand):
                assert action.env_file == f"/c/{SECRETS_SH}"
                assert f"/c/{SECRETS_SH}" in step.argv


def test_mpirun_exports_no_secret_value() -> None:
    spec = with_env("cpu-deepspeed", ENV)
    spec = replace(spec, image=replace(spec.image, openmpi=True))
    plan = launch_plan(resolve(spec, launcher_name="mpirun"), image="i:1", cluster_dir="/c")
    assert SECRET not in plan.text()
    assert "NCCL_DEBUG=INFO" in plan.text()
    (launch,) = plan.of_role("launch")
    assert "-x HF_TOKEN " in shlex.join(launch.argv)  # by name: mpirun's own environment


def test_a_spec_without_secrets_has_no_secret_files() -> None:
    spec = with_env("cpu-deepspeed", {"NCCL_DEBUG": "INFO"}, secret=())
    assert secret_files(spec) == []
    plan = launch_plan(resolve(spec), image="i:1", cluster_dir="/c")
    assert "--env-file" not in plan.text()


@pytest.mark.parametrize("runtime", ["docker", "apptainer", "singularity", "none"])
def test_the_sbatch_script_names_the_file_not_the_value(runtime: str) -> None:
    spec = with_env("cuda-torchrun", ENV)
    slurm = replace(spec.launch.section(Slurm), docker=True)  # docker under srun only when asked
    spec = replace(spec, launch=spec.launch.with_section(slurm))
    text = sbatch_script(
        resolve(Stack(spec, "s", None), runtime_name=runtime, scheduler_name="slurm"),
        image="t:1",
        cluster_dir="/shared/c",
    )
    assert SECRET not in text
    assert "p@ss" not in text
    assert "NCCL_DEBUG=INFO" in text
    name = SECRETS_ENV if runtime == "docker" else SECRETS_SH
    assert f"/shared/c/{name}" in text


def test_deepspeed_env_leaves_secrets_to_the_container() -> None:
    spec = with_env("cpu-deepspeed", ENV)
    text = dsenv_for(resolve(spec), {}, None)
    assert SECRET not in text
    assert "HF_TOKEN" not in text
    assert "NCCL_DEBUG=INFO" in text
    with pytest.raises(UsageError, match=r"HF_TOKEN: a secret never goes into \.deepspeed_env"):
        dsenv_for(resolve(spec), {"HF_TOKEN": "x"}, None)


def test_the_bundle_keeps_secret_values_out_of_its_readable_files(tmp_path: Path) -> None:
    spec = with_env("cpu-deepspeed", ENV)
    written = write_bundle(resolve(spec), tmp_path / "b", image="i:1", force=False)
    written += write_files(secret_files(spec), tmp_path / "b", force=False)
    names = {path.name for path in written}
    assert {"launch.sh", "plan.json", ".deepspeed_env", SECRETS_ENV, SECRETS_SH} <= names
    for path in written:
        text = path.read_text(errors="replace")
        if SECRET in text:
            assert path.name in (SECRETS_ENV, SECRETS_SH), path
        if path.name in (SECRETS_ENV, SECRETS_SH):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_docker_reads_secrets_env_back_exactly(tmp_path: Path) -> None:
    spec = with_env("cpu-deepspeed", ENV)
    files = {f.path: f for f in secret_files(spec)}
    assert {f.mode for f in files.values()} == {0o600}
    assert docker_env_file(files[SECRETS_ENV].text) == {"DB": AWKWARD, "HF_TOKEN": SECRET}


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_sh_reads_secrets_sh_back_exactly(shell: str, tmp_path: Path) -> None:
    spec = with_env("cpu-deepspeed", ENV)
    write_files(secret_files(spec), tmp_path, force=False)
    assert stat.S_IMODE((tmp_path / SECRETS_SH).stat().st_mode) == 0o600
    for name, value in (("HF_TOKEN", SECRET), ("DB", AWKWARD)):
        out = subprocess.run(
            [shell, "-c", f"set -a; . ./{SECRETS_SH}; printenv {name}"],
            cwd=tmp_path,
            env={"PATH": os.environ["PATH"]},
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout == value + "\n"


def test_the_bare_runtime_sources_the_file_before_the_command(tmp_path: Path) -> None:
    """The plan's own HostCommand argv, run: the value arrives, argv holds only the path."""
    spec = with_env("cpu-deepspeed", ENV)
    write_files(secret_files(spec), tmp_path, force=False)
    action = HostCommand(("printenv", "DB"), (("A", "1"),), str(tmp_path / SECRETS_SH))
    assert AWKWARD not in " ".join(action.argv())
    out = subprocess.run(action.argv(), capture_output=True, text=True, check=True)
    assert out.stdout == AWKWARD + "\n"


def test_cli_launch_json_shows_no_secret(tmp_path: Path) -> None:
    spec = tmp_path / "stack.yaml"
    text = preset_text("cpu-deepspeed").replace(
        "  script: train.py\n",
        f"  env:\n    HF_TOKEN: {SECRET}\n    NCCL_DEBUG: INFO\n  script: train.py\n",
    )
    spec.write_text(text)
    for extra in ([], ["--json"]):
        result = CliRunner().invoke(app, ["launch", str(spec), "--cluster-dir", "/c", *extra])
        assert result.exit_code == 0, result.output
        assert SECRET not in result.output
        assert f"/c/{SECRETS_ENV}" in result.output


@pytest.mark.parametrize("value", ["hf_s3cr3t\\x07x", "hf_s3cr3t\\u202ex", "hf_s3cr3t\\nx"])
def test_a_refused_secret_value_is_never_shown(tmp_path: Path, value: str) -> None:
    """A value launch.env refuses is named by its path, on stderr and in --json alike."""
    spec = tmp_path / "stack.yaml"
    spec.write_text(
        preset_text("cpu-deepspeed").replace(
            "  script: train.py\n", f'  env:\n    HF_TOKEN: "{value}"\n  script: train.py\n'
        )
    )
    for extra in ([], ["--json"]):
        result = CliRunner().invoke(app, ["launch", str(spec), *extra])
        assert result.exit_code == 1, result.output
        assert "launch.env.HF_TOKEN" in result.output
        assert "s3cr3t" not in result.output


def test_a_secret_number_is_not_shown_either(tmp_path: Path) -> None:
    spec = tmp_path / "stack.yaml"
    spec.write_text(
        preset_text("cpu-deepspeed").replace(
            "  script: train.py\n", "  env:\n    DB_PASSWORD: 31415926\n  script: train.py\n"
        )
    )
    result = CliRunner().invoke(app, ["launch", str(spec), "--json"])
    assert result.exit_code == 1
    assert "launch.env.DB_PASSWORD" in result.output
    assert "31415926" not in result.output


def test_a_bare_node_sources_the_secrets_for_the_ranks_too() -> None:
    """Runtime none: the launcher's ssh sessions inherit nothing, so DeepSpeed's pdsh line
    sources the bundle's secrets.sh first (--venv_script): its path, never a value."""
    spec = with_env("cpu-deepspeed", ENV)
    plan = launch_plan(resolve(spec, runtime_name="none"), image="i:1", cluster_dir="/c")
    argv = plan.steps[-1].argv
    assert argv[argv.index("--venv_script") + 1] == f"/c/{SECRETS_SH}"
    assert SECRET not in " ".join(argv)
    docker = launch_plan(resolve(spec), image="i:1", cluster_dir="/c")
    assert "--venv_script" not in docker.steps[-1].argv  # the container's sshd hands it on
    no_secret = with_env("cpu-deepspeed", {"NCCL_DEBUG": "INFO"}, ())
    bare = launch_plan(resolve(no_secret, runtime_name="none"), image="i:1", cluster_dir="/c")
    assert "--venv_script" not in bare.steps[-1].argv


def test_gaudi_spawn_on_a_bare_node_refuses_secrets_it_cannot_hand_on() -> None:
    spec = with_env("gaudi-deepspeed", ENV)
    spec = replace(spec, launch=replace(spec.launch, launcher="gaudi_spawn"))
    with pytest.raises(UsageError, match="venv_script"):
        launch_plan(resolve(spec, runtime_name="none"), image="i:1", cluster_dir="/c")
    launch_plan(resolve(spec), image="i:1", cluster_dir="/c")  # docker: the container's

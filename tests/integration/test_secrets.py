"""Secret launch variables with the real docker CLI: secrets.env gives each value back
exactly, and the plan's own `docker run` carries them with only the file's path on argv."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from builder.launch.actions import ContainerStart
from builder.launch.plan import launch_plan
from builder.launch.secrets import SECRETS_ENV, secret_files
from builder.output import write_files
from builder.resolved import resolve
from builder.spec.loader import load_preset
from tests.conftest import real_tool
from tests.unit.test_secrets import AWKWARD, SECRET

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration


def printenv(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120).stdout


def test_docker_reads_secrets_env_back_exactly(base_image: str, tmp_path: Path) -> None:
    spec = load_preset("cpu-deepspeed").spec
    env = {"HF_TOKEN": SECRET, "NCCL_DEBUG": "INFO", "DB": AWKWARD}
    spec = replace(spec, launch=replace(spec.launch, env=env, secret=("DB",)))
    write_files(secret_files(spec), tmp_path, force=False)
    docker = real_tool("docker")
    env_file = str(tmp_path / SECRETS_ENV)
    for name, value in (("HF_TOKEN", SECRET), ("DB", AWKWARD)):
        argv = [docker, "run", "--rm", "--env-file", env_file, base_image, "printenv", name]
        assert printenv(argv) == value + "\n"
    # the plan's own start action, in the foreground, printing instead of serving sshd
    plan = launch_plan(resolve(spec), image=base_image, cluster_dir=str(tmp_path))
    start = plan.of_role("start")[0].action
    assert isinstance(start, ContainerStart)
    run = replace(start, name=None, detach=False, remove=True, flags=(), binds=(), command=("env",))
    argv = run.argv()
    assert SECRET not in " ".join(argv)
    shown = printenv([docker, *argv[1:]])
    assert f"HF_TOKEN={SECRET}\n" in shown
    assert f"DB={AWKWARD}\n" in shown
    assert "NCCL_DEBUG=INFO\n" in shown

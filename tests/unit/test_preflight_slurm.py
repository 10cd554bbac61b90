"""Preflight under Slurm: the probe as the run's own batch job (--dry-run -o FOLDER), the
nodes' output judged with --from-log; what does not belong is refused. The job runs on a
real Slurm in tests/integration/test_preflight_slurm.py."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder import PreflightSettings, resolve, slurm_expected
from builder.cli.app import app
from builder.spec.loader import load_preset
from tests.conftest import real_tool
from tests.unit.test_preflight import output, reports

if TYPE_CHECKING:
    from pathlib import Path

    from typer.testing import Result

IMAGE = "registry.example.com/team/train:1"


def _preflight(*args: str) -> Result:
    return CliRunner().invoke(app, ["preflight", "--preset", "cpu-deepspeed", *args])


def test_the_probe_is_the_runs_own_batch_job(tmp_path: Path) -> None:
    folder = tmp_path / "probe"
    result = _preflight("--scheduler", "slurm", "--dry-run", "-o", str(folder), "--image", IMAGE)
    assert result.exit_code == 0, result.output
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert names == [
        "README.md",
        "job.sbatch",
        "preflight/collect.py",
        "preflight/preflight.py",
        "preflight/preflight_devices.py",
    ]
    job = (folder / "job.sbatch").read_text()
    here = folder.resolve()
    assert "#SBATCH --job-name=cpu-deepspeed-preflight\n" in job
    assert "#SBATCH --nodelist=node1,node2\n" in job  # the nodes the report is judged on
    assert f"--bind {here}/preflight:/etc/builder/preflight:ro" in job
    assert (
        "/etc/builder/preflight/preflight.py --device cpu --backend gloo --transport sockets" in job
    )
    assert "--matmul 512 --copy-bytes 67108864 --sweep 4096:67108864 --link-bytes 8388608" in job
    subprocess.run([real_tool("shellcheck"), str(folder / "job.sbatch")], check=True)
    readme = (folder / "README.md").read_text()
    assert f"sbatch --parsable --wait {here}/job.sbatch" in readme
    assert "--scheduler slurm --from-log preflight.log" in readme


def test_the_sites_own_node_list_is_kept(tmp_path: Path) -> None:
    spec = tmp_path / "stack.yaml"
    text = CliRunner().invoke(app, ["init", "--preset", "cpu-deepspeed", "-o", "-"]).stdout
    marker = "    cpus_per_node: 8"
    assert marker in text
    spec.write_text(text.replace(marker, "    extra: ['--nodelist=gpu[01-02]']\n" + marker))
    folder = tmp_path / "probe"
    result = CliRunner().invoke(
        app,
        ["preflight", str(spec), "--scheduler", "slurm", "--dry-run", "-o", str(folder)],
    )
    assert result.exit_code == 0, result.output
    job = (folder / "job.sbatch").read_text()
    assert job.count("--nodelist=") == 1
    assert "#SBATCH --nodelist=gpu[01-02]\n" in job


def test_from_log_judges_the_nodes_output(tmp_path: Path) -> None:
    want = slurm_expected(resolve(load_preset("cpu-deepspeed").spec), PreflightSettings())
    assert want.nodes == ("node1", "node2")
    found = reports(want)
    log = tmp_path / "preflight.log"
    log.write_text(output(found))
    result = _preflight("--scheduler", "slurm", "--from-log", str(log))
    assert result.exit_code == 0, result.output
    assert "ok: preflight passed on 2 nodes" in result.output
    log.write_text(output([r for r in found if r["node"] == "node1"]))
    result = _preflight("--scheduler", "slurm", "--from-log", str(log))
    assert result.exit_code == 15
    assert "node2" in result.output


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ((), "--dry-run"),  # builder submits nothing to a cluster
        (("--dry-run",), "--dry-run -o FOLDER"),
        (("--dry-run", "-o", "p", "--cluster-dir", "c"), "--cluster-dir"),
        (("--rehearse", "-o", "p"), "--output"),
        (("--dry-run", "-o", "p", "--job", "trainjob"), "--job"),
        (("--from-log", "x.log", "-o", "p"), "--output"),
    ],
)
def test_what_does_not_belong_is_refused(
    extra: tuple[str, ...], named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _preflight("--scheduler", "slurm", *extra)
    assert result.exit_code == 2, result.output
    assert named in result.output
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []

"""The preflight probe run for real by torch's own launcher (torchrun, gloo, CPU) on
this machine, and judged; and preflight against nodes this machine's real ssh
cannot reach."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from builder import platforms
from builder.cli.app import app
from builder.payload import payload_path
from builder.preflight.probe import Settings, expected_of, probe_args
from builder.preflight.report import judge
from tests.conftest import real_tool

PRESETS = Path(__file__).parents[2] / "builder" / "spec" / "presets"


def test_the_probe_runs_under_torchrun_and_passes(tmp_path: Path) -> None:
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        real_tool("torchrun")
    # the probe and what it imports beside it, as preflight writes them to the nodes
    for name in ("preflight.py", "preflight_devices.py", "collect.py"):
        shutil.copyfile(payload_path(name), tmp_path / name)
    settings = Settings(quick=True, budget=4)
    args = probe_args(platforms.get("cpu"), 2, settings, threads=1)
    run = subprocess.run(
        [
            str(torchrun),
            "--standalone",
            "--nproc-per-node",
            "4",
            str(tmp_path / "preflight.py"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    # 4 ranks, 2 per "node": the ranks of one node here are one node of the plan
    want = expected_of(
        platforms.get("cpu"), ("n1", "n2"), 2, fabric="none", env={}, settings=settings
    )
    result = judge(run.stdout, want)
    fails = [f.text() for f in result.findings if f.severity == "fail"]
    rates = ("matmul", "memory copy", "link")  # one machine's cores: judged elsewhere
    assert [f for f in fails if not any(word in f for word in rates)] == []
    assert [row.ranks for row in result.nodes] == [2, 2]
    assert all(row.tflops and row.memory_gbps and row.out_gbps for row in result.nodes)
    assert len({row.digest for row in result.nodes}) == 1
    assert {"world", "inter", "intra"} <= set(result.sweep)
    assert all(p["busbw"] > 0 for p in result.sweep["world"])


def test_unreachable_nodes_are_named_and_nothing_is_written(tmp_path: Path) -> None:
    real_tool("ssh")
    data = yaml.safe_load((PRESETS / "cpu-deepspeed.yaml").read_text())
    data["launch"]["nodes"] = ["gone1.invalid", "gone2.invalid"]
    (tmp_path / "stack.yaml").write_text(yaml.safe_dump(data))
    cluster = tmp_path / "cluster"
    result = CliRunner().invoke(
        app, ["preflight", str(tmp_path / "stack.yaml"), "--cluster-dir", str(cluster)]
    )
    assert result.exit_code == 16, result.output
    assert "gone1.invalid: ssh exit 255" in result.stderr
    assert "gone2.invalid" in result.stderr
    assert "nothing was written" in result.stderr
    assert not cluster.exists()

"""Our mpirun command and hostfile run by real OpenMPI: every rank starts, with the
environment values (secrets forwarded by name only) and script arguments we meant."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from builder.cluster.hostfile import hostfile_text, hosts_from_nodes
from builder.launch.launchers import mpirun_argv
from builder.spec.loader import load_preset
from tests.conftest import real_tool

PROBE = """\
import json, os, sys
print(json.dumps({
    "rank": os.environ["OMPI_COMM_WORLD_RANK"],
    "size": os.environ["OMPI_COMM_WORLD_SIZE"],
    "value": os.environ["TRICKY"],
    "secret": os.environ["HF_TOKEN"],
    "master": os.environ["MASTER_ADDR"] + ":" + os.environ["MASTER_PORT"],
    "args": sys.argv[1:],
}))
"""


def test_openmpi_runs_every_rank_with_our_values(tmp_path: Path) -> None:
    import json

    mpirun = real_tool("mpirun")
    probe = tmp_path / "probe dir" / "probe.py"
    probe.parent.mkdir()
    probe.write_text(PROBE)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(hostfile_text(hosts_from_nodes(["localhost"], 2)))
    spec = load_preset("cpu-deepspeed").spec
    launch = replace(
        spec.launch,
        slots=2,
        script=str(probe),
        args=("a b", "$HOME", "it's"),
        env={"TRICKY": 'a b $c "q" 50% ✓'},
        master_port=29555,
    )
    argv = mpirun_argv(
        launch,
        hostfile=str(hostfile),
        nnodes=1,
        master_addr="localhost",
        as_root=os.geteuid() == 0,
        secrets=("HF_TOKEN",),
    )
    assert not any("hunter2" in arg for arg in argv)
    argv[0] = mpirun
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "HF_TOKEN": "hunter2 $x",  # in mpirun's environment, as --env-file puts it
    }
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=env, timeout=120)
    # mpirun's output forwarding may join two ranks' lines: read object after object
    decoder, ranks, at = json.JSONDecoder(), [], out.stdout.find("{")
    while at >= 0:
        report, end = decoder.raw_decode(out.stdout, at)
        ranks.append(report)
        at = out.stdout.find("{", end)
    ranks.sort(key=lambda r: r["rank"])
    assert [r["rank"] for r in ranks] == ["0", "1"]
    for rank in ranks:
        assert rank["size"] == "2"
        assert rank["value"] == 'a b $c "q" 50% ✓'
        assert rank["secret"] == "hunter2 $x"
        assert rank["master"] == "localhost:29555"
        assert rank["args"] == ["a b", "$HOME", "it's"]

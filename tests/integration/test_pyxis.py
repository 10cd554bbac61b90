"""The Slurm rehearsal on a site's node image: the job `builder slurm --runtime pyxis`
writes, run by pyxis and enroot for real on a real Slurm.

The tests marked ``site`` need what this project may not carry: a node image with
slurmd, munge, pyxis and enroot (BUILDER_NODE_IMAGE), and enroot on this machine for
`builder squashfs`'s import. Neither is in Debian or on PyPI, and a recipe that builds
them from their sources may not be committed here (docs/howto/slurm-pyxis.md says what
ran, when, at which versions). `make test` deselects them; `make test-site` runs them and
fails, never skips, when a part is missing. The rest runs in CI: a node image without
pyxis is named, node by node, before any job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.rehearse.run import Rehearsal, rehearsal_of
from builder.rehearse.slurm import slurm_image
from builder.schedulers.slurm.section import Slurm
from builder.spec.loader import load_preset
from tests.integration.images import IMAGE
from tests.integration.test_rehearse import FAILS_ON_RANK_3, SLOTS

if TYPE_CHECKING:
    from pathlib import Path

    from builder.engine import DockerEngine
    from builder.spec.records import Spec

pytestmark = pytest.mark.integration

SECRET = "hf_x 'q' \"dq\" $HOME `id` ;|&"
"""A secret launch variable: secrets.sh, bound read-only, is sourced inside the container."""


def pyxis_spec(launcher: str, squashfs: str) -> Spec:
    """cpu-deepspeed under launcher, in pyxis from squashfs, with a secret in its run."""
    spec = load_preset("cpu-deepspeed").spec
    launch = replace(
        spec.launch,
        launcher=launcher,
        squashfs=squashfs,
        env={**spec.launch.env, "HF_TOKEN": SECRET, "RUN_NOTE": "plain"},
    )
    section = replace(launch.section(Slurm), runtime="pyxis")
    return replace(spec, launch=launch.with_section(section))


def test_a_node_image_without_pyxis_is_named_on_every_node(
    engine: DockerEngine, clean: None, tmp_path: Path
) -> None:
    """Slurm's own image for the stack has slurmd but no pyxis: each node is named, and
    no job is submitted."""
    del clean
    sqsh = tmp_path / "image.sqsh"
    sqsh.write_bytes(b"hsqs")
    nodes_image = slurm_image(engine, IMAGE, print)
    resolved = rehearsal_of(pyxis_spec("torchrun", str(sqsh)), "slurm")
    with Rehearsal(resolved, image=IMAGE, engine=engine, nodes=2, nodes_image=nodes_image) as run:
        run.up()
        outcome = run.job()
    assert not outcome.ok
    assert sorted(f.node or "" for f in outcome.faults) == ["node1", "node2"]
    assert all(f"{nodes_image} has no pyxis" in f.what for f in outcome.faults)
    assert "job" not in [name for name, _ in outcome.phases]


@pytest.fixture(scope="module")
def node_image() -> str:
    reference = os.environ.get("BUILDER_NODE_IMAGE")
    if not reference:
        pytest.fail(
            "BUILDER_NODE_IMAGE is unset: name a node image with slurmd, munge, pyxis and "
            "enroot in the local engine (docs/howto/slurm-pyxis.md)"
        )
    return reference


@pytest.fixture(scope="module")
def squashfs(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The stack's image as enroot imports it: the very command `builder squashfs`
    prints, run with this machine's enroot."""
    if shutil.which("enroot") is None:
        pytest.fail("enroot is not on PATH here: `builder squashfs`'s import needs it")
    output = tmp_path_factory.mktemp("squashfs") / "cpu-deepspeed.sqsh"
    shown = CliRunner().invoke(app, ["squashfs", IMAGE, "-o", str(output), "--json"])
    assert shown.exit_code == 0, shown.output
    argv = json.loads(shown.stdout)["result"]["argv"]
    subprocess.run(argv, check=True, capture_output=True, timeout=900)
    return str(output)


@pytest.mark.site
@pytest.mark.parametrize("launcher", ["deepspeed", "torchrun", "srun"])
def test_pyxis_runs_the_job_on_every_rank(
    engine: DockerEngine, clean: None, node_image: str, squashfs: str, launcher: str
) -> None:
    """srun --container-image on the squashfs, with the script's mounts, workdir,
    environment and secret: the right all-reduce on 2 nodes x 2 ranks, every value of
    the run on every rank."""
    del clean
    resolved = rehearsal_of(pyxis_spec(launcher, squashfs), "slurm")
    with Rehearsal(resolved, image=IMAGE, engine=engine, nodes=2, nodes_image=node_image) as run:
        run.up()
        outcome = run.job()
        script = (run.session.folder / "job.sbatch").read_text()
        expected = run.workload.expected
    assert outcome.ok, [fault.text() for fault in outcome.faults]
    assert f"--container-image={squashfs}" in script
    assert SECRET not in script
    assert expected is not None
    assert expected.env["HF_TOKEN"] == SECRET  # each rank read it from secrets.sh
    assert [row.rank for row in outcome.rows] == list(range(2 * SLOTS))
    assert {row.sum for row in outcome.rows} == {2 * SLOTS * (2 * SLOTS + 1) / 2}
    assert "pyxis on every node" in [name for name, _ in outcome.phases]


@pytest.mark.site
def test_a_failing_rank_in_pyxis_is_named(
    engine: DockerEngine, clean: None, node_image: str, squashfs: str, tmp_path: Path
) -> None:
    """torchrun in pyxis: rank 3 (node2) fails; the rehearsal names node2, the batch
    script's last lines name the rank."""
    del clean
    script = tmp_path / "fails.py"
    script.write_text(FAILS_ON_RANK_3)
    resolved = rehearsal_of(pyxis_spec("torchrun", squashfs), "slurm")
    with Rehearsal(
        resolved,
        image=IMAGE,
        engine=engine,
        nodes=2,
        script=str(script),
        timeout=300,
        nodes_image=node_image,
    ) as run:
        run.up()
        outcome = run.job()
        main = next(run.session.folder.glob("cpu-deepspeed-*.out")).read_text()
    assert not outcome.ok
    assert "node2" in {fault.node for fault in outcome.faults}, [f.text() for f in outcome.faults]
    assert "job: the first failure: rank 3 on node2" in main, main[-2000:]

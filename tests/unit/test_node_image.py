"""A Slurm rehearsal on a site's node image (--node-image): what it takes is refused
before any container when it cannot work: a runtime the nodes do not carry, an image
file that is unset or not on this machine, a launcher that is no batch job's, an image
not in the engine. tests/integration/test_pyxis.py runs pyxis and enroot for real, and
tests/integration/test_rehearse.py a node image without them."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from builder.errors import NotInEngine, UsageError
from builder.rehearse.run import rehearsal_of, rehearse
from builder.rehearse.slurm import node_image_for
from builder.schedulers.slurm.section import Slurm
from builder.spec.loader import load_preset
from tests.fakes import FakeEngine
from tests.unit.test_rehearse_orchestration import stack_image

if TYPE_CHECKING:
    from pathlib import Path

    from builder.spec.records import Spec

NODE_IMAGE = "site/slurm-node:22.05"


def slurm_spec(runtime: str, squashfs: str | None = None) -> Spec:
    spec = load_preset("cpu-deepspeed").spec
    section = replace(spec.launch.section(Slurm), runtime=runtime)
    launch = replace(spec.launch, squashfs=squashfs).with_section(section)
    return replace(spec, launch=launch)


def test_pyxis_reads_the_squashfs_here(tmp_path: Path) -> None:
    sqsh = tmp_path / "train.sqsh"
    sqsh.write_bytes(b"hsqs")
    site = node_image_for(rehearsal_of(slurm_spec("pyxis", squashfs=str(sqsh)), "slurm"), "x:1")
    assert (site.runtime.name, site.file, site.folder) == ("pyxis", str(sqsh), str(tmp_path))
    assert "enroot" in site.runtime.on_node


@pytest.mark.parametrize("runtime", ["none"])
def test_a_runtime_no_node_carries_is_refused(runtime: str) -> None:
    with pytest.raises(UsageError, match=f"the job's runtime is {runtime} .*pyxis or apptainer"):
        node_image_for(rehearsal_of(slurm_spec(runtime), "slurm"), NODE_IMAGE)


def test_an_unset_image_file_is_named_with_how_to_make_it() -> None:
    unset = r"{}, which is unset: make it with `builder {} IMAGE -o FILE` and run the command"
    with pytest.raises(UsageError, match=unset.format("launch.squashfs", "squashfs")):
        node_image_for(rehearsal_of(slurm_spec("pyxis"), "slurm"), NODE_IMAGE)
    with pytest.raises(UsageError, match=unset.format("launch.sif", "sif")):
        node_image_for(rehearsal_of(slurm_spec("apptainer"), "slurm"), NODE_IMAGE)


def test_an_image_file_not_here_is_refused(tmp_path: Path) -> None:
    missing = str(tmp_path / "gone.sqsh")
    resolved = rehearsal_of(slurm_spec("pyxis", squashfs=missing), "slurm")
    with pytest.raises(UsageError, match=r"launch.squashfs '.*: no such file on this machine"):
        node_image_for(resolved, NODE_IMAGE)


def test_a_node_image_needs_a_batch_rehearsal_and_the_engine(tmp_path: Path) -> None:
    sqsh = tmp_path / "train.sqsh"
    sqsh.write_bytes(b"hsqs")
    spec = slurm_spec("pyxis", squashfs=str(sqsh))
    fake = FakeEngine(stack_image(spec))
    with pytest.raises(UsageError, match=r"--node-image a:1: .*give --launcher slurm"):
        rehearse(spec, image=None, engine=fake, nodes=2, launcher="torchrun", nodes_image="a:1")
    with pytest.raises(NotInEngine, match="--node-image a:1 is not in the local engine"):
        rehearse(spec, image=None, engine=fake, nodes=2, launcher="slurm", nodes_image="a:1")
    assert fake.called("start") == []

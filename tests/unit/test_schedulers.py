"""The schedulers behind one protocol: each materializes the resolved stack's run as
files (a dry run: nothing written), says how a run starts and stops, and a launcher
dropped in beside the others changes neither the Slurm script nor what the Slurm
rehearsal runs."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

import builder.launch.launchers
from builder import schedulers
from builder.cluster.folder import run_folder
from builder.launch import launchers
from builder.rehearse.run import rehearsal_of
from builder.resolved import resolve
from builder.schedulers.base import Scheduler
from builder.schedulers.slurm.script import SCRIPT, sbatch_script
from builder.schedulers.slurm.section import Slurm
from builder.schedulers.ssh import SCHEDULER as SSH
from builder.spec.loader import load_preset

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from builder.spec.records import Spec


def torchrun_spec() -> Spec:
    spec = load_preset("cpu-deepspeed").spec
    slurm = replace(spec.launch.section(Slurm), cpus_per_node=None, cpus_per_task=8, docker=True)
    return replace(spec, launch=replace(spec.launch, launcher="torchrun").with_section(slurm))


def test_every_scheduler_is_one_module_behind_the_protocol() -> None:
    assert set(schedulers.names()) >= {"ssh", "slurm"}
    for name in schedulers.names():
        scheduler = schedulers.get(name)
        assert isinstance(scheduler, Scheduler)
        assert scheduler.name == name
        assert scheduler.started
        assert scheduler.stopped


def test_materialize_is_a_dry_run_of_what_each_scheduler_writes(tmp_path: Path) -> None:
    spec = torchrun_spec()
    folder = tmp_path / "cluster"
    ssh = resolve(spec)
    files = {f.path: f for f in SSH.materialize(ssh, image="t:1", folder=run_folder(folder))}
    assert {"launch.sh", "hostfile", ".deepspeed_env", "plan.json", "README.md"} <= set(files)
    assert files["launch.sh"].mode == 0o755
    assert not folder.exists()  # nothing written

    slurm = resolve(spec, scheduler_name="slurm")
    assert (
        slurm.runtime.name == spec.launch.section(Slurm).runtime
    )  # the scheduler's default runtime
    made = slurm.scheduler.materialize(slurm, image="t:1", folder=run_folder(folder))
    files = {f.path: f for f in made}
    assert set(files) == {SCRIPT, "README.md"}  # no secret in launch.env: no secret file
    job = files[SCRIPT]
    assert job.text == sbatch_script(slurm, image="t:1", cluster_dir=str(folder.resolve()))
    assert f"sbatch {folder.resolve()}/{SCRIPT}" in files["README.md"].text
    assert not folder.exists()


EXTRA = '''
    """A launcher that sorts first and can run in a batch task."""
    from builder.launch.launchers.base import Launcher, LauncherCommand

    class First(Launcher):
        name = "aaa_first"
        batch = True

        def command(self, context):
            return LauncherCommand(("aaa_first", context.spec.launch.script), ())

    LAUNCHER = First()
'''


@pytest.fixture
def extra_launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    (tmp_path / "aaa_first.py").write_text(textwrap.dedent(EXTRA))
    package = builder.launch.launchers
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    launchers._by_name.cache_clear()
    launchers.setting_keys.cache_clear()
    yield
    launchers._by_name.cache_clear()
    launchers.setting_keys.cache_clear()
    sys.modules.pop("builder.launch.launchers.aaa_first", None)


def test_a_new_launcher_changes_neither_the_slurm_script_nor_the_slurm_rehearsal(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    spec = torchrun_spec()
    before = sbatch_script(
        resolve(spec, scheduler_name="slurm"), image="t:1", cluster_dir=str(tmp_path)
    )
    request.getfixturevalue("extra_launcher")
    assert launchers.names()[0] == "aaa_first"  # it sorts first, and runs in batch tasks
    after = sbatch_script(
        resolve(spec, scheduler_name="slurm"), image="t:1", cluster_dir=str(tmp_path)
    )
    assert after == before
    rehearsal = rehearsal_of(load_preset("cpu-deepspeed"), "slurm")
    assert rehearsal.launcher.name == "deepspeed"  # the spec's own: it runs in batch jobs
    assert rehearsal.scheduler.batch
    # one that cannot (mpirun) is rehearsed with the named batch launcher, not sort order
    mpirun = load_preset("cpu-deepspeed").spec
    image = replace(mpirun.image, openmpi=True)
    mpirun = replace(mpirun, image=image, launch=replace(mpirun.launch, launcher="mpirun"))
    assert rehearsal_of(mpirun, "slurm").launcher.name == "torchrun"

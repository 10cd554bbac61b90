"""The README's and the tutorials' command sequences, the blocks that need more than
builder: a Docker engine (`<!-- engine -->`) or a fresh copy of the repository
(`<!-- fresh-clone -->`). The convention is in tests/unit/test_docs.py.

The tutorials' `builder build cpu.yaml` is not run (it downloads the base and the CPU
torch); the image it makes is the suite's shared cpu-deepspeed image, built from the
same preset, tagged with the preset's name for the rehearsal and preflight steps and
untagged after. Those steps take about 20 s each on a 2-core machine.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from tests.integration.images import IMAGE
from tests.unit.test_docs import ROOT, RUN_FILES, environment, run_block, steps

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from builder.engine.build import BuildResult
    from builder.engine.docker import DockerEngine

pytestmark = pytest.mark.integration

PRESET_IMAGE = "builder/cpu-deepspeed:latest"
"""The name `builder build cpu.yaml` gives the cpu-deepspeed preset's image."""


@pytest.fixture
def preset_image(engine: DockerEngine, cpu_image: BuildResult) -> Iterator[str]:
    """The suite's cpu-deepspeed image under the preset's own name, for this test only."""
    before = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", PRESET_IMAGE],
        capture_output=True,
        text=True,
        check=False,
    )
    subprocess.run(["docker", "tag", IMAGE, PRESET_IMAGE], check=True)
    yield PRESET_IMAGE
    if before.returncode == 0:
        subprocess.run(["docker", "tag", before.stdout.strip(), PRESET_IMAGE], check=True)
    else:
        subprocess.run(["docker", "rmi", "--no-prune", PRESET_IMAGE], check=True)


@pytest.mark.parametrize(
    "path", [p for p in RUN_FILES if p.name.startswith("tutorial")], ids=lambda p: p.name
)
def test_the_tutorial_runs_with_an_engine(
    path: Path, tmp_path: Path, preset_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every block of the page that runs here or with an engine, in order."""
    env = environment()
    start = time.monotonic()
    took = {str(b): run_block(b, tmp_path, env) for b in steps(path, {"run", "engine"})}
    with capsys.disabled():
        print(f"\n{path.name}: {time.monotonic() - start:.1f} s ({took})")


def _fresh_copy(target: Path) -> Path:
    """The repository's tracked and new files, without .venv or build outputs: what a
    fresh clone of this working tree holds."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def test_the_readme_runs_on_a_fresh_clone(tmp_path: Path) -> None:
    """Install and the quick start, in a copy of the repository with no .venv: pip
    installs builder from it, `make demo` renders the default preset."""
    readme = ROOT / "README.md"
    folder = _fresh_copy(tmp_path / "clone")
    env = environment(with_venv=False)
    for block in steps(readme, {"run", "fresh-clone"}):
        run_block(block, folder, env)
    assert (folder / "build" / "demo" / "Dockerfile").is_file()
    assert (folder / "build" / "demo" / "cluster" / "launch.sh").is_file()

"""Every .def builder emits, executed: the stand-in for `apptainer build` (deffile_runner).

The cpu-deepspeed spec with requirements, a lock, a CA bundle and the wheelhouse
is rendered to a folder; its full .def then runs in one container of its base
image (%files, %post under /bin/sh -ex, %environment, %test, %runscript), and
its docker-daemon .def in one container of the image `builder build` made.
The lock is taken from that built image, the way a user makes one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.engine.build import build_image
from builder.lint.deffile import check_deffile
from builder.lock.file import lock_path
from builder.resolved import resolve
from builder.spec.loader import load_spec
from tests.integration.deffile_runner import run_deffile
from tests.integration.images import BASE_IMAGE, CA_BUNDLE

if TYPE_CHECKING:
    from pathlib import Path

    from builder.engine import Engine
    from builder.engine.build import BuildResult
    from builder.image.inputs import BuildInputs

pytestmark = pytest.mark.integration

REFERENCE = "builder-test/deftest:it"
NAME = "deftest"
# already in the cpu-deepspeed image (DeepSpeed needs it): the build from the image's
# cache is quick, and the lock taken from it holds exactly what the .def installs
REQUIREMENT = "einops==0.8.2\n"


@pytest.fixture(scope="module")
def rendered(
    cpu_image: BuildResult,
    engine: Engine,
    inputs: BuildInputs,
    wheelhouse: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """The folder `builder render -f apptainer` wrote for the locked spec."""
    folder = tmp_path_factory.mktemp("deftest")
    spec = folder / "stack.yaml"
    made = CliRunner().invoke(app, ["init", "--preset", "cpu-deepspeed", "-o", str(spec)])
    assert made.exit_code == 0, made.stderr
    text = spec.read_text()
    text = re.sub(r"(?m)^  name: .*$", f"  name: builder-test/{NAME}", text, count=1)
    text = re.sub(r"(?m)^  tag: .*$", "  tag: it", text, count=1)
    text = text.replace(
        "  workdir: /workspace\n", "  workdir: /workspace\n  requirements: req.txt\n"
    )
    spec.write_text(text)
    (folder / "req.txt").write_text(REQUIREMENT)
    build_image(resolve(load_spec(spec), inputs), reference=REFERENCE, engine=engine)
    locked = CliRunner().invoke(app, ["lock", str(spec), "--image", REFERENCE])
    assert locked.exit_code == 0, locked.stderr
    assert lock_path(spec).is_file()
    out = folder / "out"
    result = CliRunner().invoke(
        app,
        [
            "render",
            str(spec),
            "-f",
            "apptainer",
            "-o",
            str(out),
            "--base-image",
            BASE_IMAGE,
            "--ca-bundle",
            str(CA_BUNDLE),
            "--wheelhouse",
            str(wheelhouse),
        ],
    )
    assert result.exit_code == 0, result.stderr
    return out


def test_the_def_builds_from_its_base_and_passes_its_test(rendered: Path, engine: Engine) -> None:
    deffile = rendered / "cpu-deepspeed.def"
    text = deffile.read_text()
    # every input this test is about is in the file that runs
    for needed in ("requirements.txt", "lock.txt", "lock-check.py", "builder-ca.pem", "wheels/"):
        assert needed in text, needed
    assert [f for f in check_deffile(text, str(deffile)) if f.level == "error"] == []
    run = run_deffile(engine, deffile, timeout=1200)
    assert run.ok, f"exit {run.code} after {run.phases}:\n{run.output[-4000:]}"
    assert run.phases == ["files", "post", "test", "runscript"]
    assert "runscript-args" in run.output


def test_the_docker_daemon_def_runs_on_the_built_image(rendered: Path, engine: Engine) -> None:
    run = run_deffile(engine, rendered / "cpu-deepspeed.docker-daemon.def", timeout=300)
    assert run.ok, f"exit {run.code} after {run.phases}:\n{run.output[-4000:]}"
    assert run.phases == ["files", "test", "runscript"]

"""Build failures against the real engine: each names what failed, exits with its
own code, and moves no tag."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.errors import EXIT_CODES
from builder.spec.presets import preset_text
from tests.integration.images import CA_BUNDLE

if TYPE_CHECKING:
    from pathlib import Path

    from builder.engine import Engine

pytestmark = pytest.mark.integration


def spec_with(tmp_path: Path, old: str, new: str, name: str) -> Path:
    path = tmp_path / "stack.yaml"
    text = preset_text("cpu-deepspeed").replace(old, new)
    path.write_text(text.replace("name: builder/cpu-deepspeed", f"name: {name}"))
    return path


def test_a_failing_step_names_the_step_and_moves_no_tag(
    engine: Engine, base_image: str, tmp_path: Path
) -> None:
    tag = "builder-test/failing:1"
    engine.remove_image(tag)
    spec = spec_with(
        tmp_path,
        "  pdsh: true\n",
        "  pdsh: true\n  apt: [no-such-package-xyz]\n",
        "builder-test/failing",
    )
    result = CliRunner().invoke(
        app, ["build", str(spec), "--base-image", base_image, "-t", tag, "--progress", "plain"]
    )
    assert result.exit_code == EXIT_CODES["BuildError"]
    assert "Traceback" not in result.stderr
    assert "failed at step" in result.stderr
    assert "RUN apt-get update" in result.stderr
    assert "Unable to locate package no-such-package-xyz" in result.stderr
    assert "no tag was moved" in result.stderr
    assert not engine.exists(tag)


def test_an_unreachable_engine_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    result = CliRunner().invoke(app, ["build", "--preset", "cpu-deepspeed", "--progress", "plain"])
    assert result.exit_code == EXIT_CODES["EngineUnavailable"]
    assert "no Docker engine answers at tcp://127.0.0.1:9" in result.stderr
    assert "DOCKER_HOST" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_base_image_is_named(engine: Engine) -> None:
    tag = "builder-test/nobase:1"
    result = CliRunner().invoke(
        app,
        [
            "build",
            "--preset",
            "cpu-deepspeed",
            "--base-image",
            "builder-test/does-not-exist:1",
            "-t",
            tag,
            "--progress",
            "plain",
        ],
    )
    assert result.exit_code == EXIT_CODES["BuildError"]
    assert "at step 1/" in result.stderr
    assert "builder-test/does-not-exist" in result.stderr
    assert "The base image is not in the engine" in result.stderr
    assert not engine.exists(tag)


def test_ctrl_c_stops_the_build_and_tags_nothing(
    engine: Engine, base_image: str, tmp_path: Path
) -> None:
    tag = "builder-test/interrupted:1"
    engine.remove_image(tag)
    # --no-cache makes the apt step run long enough to be interrupted; the extra
    # package marks this build's container among any others on the engine
    marker = "bsdextrautils"
    spec = spec_with(
        tmp_path, "  pdsh: true\n", f"  pdsh: true\n  apt: [{marker}]\n", "builder-test/interrupted"
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "builder",
            "build",
            str(spec),
            "--base-image",
            base_image,
            "-t",
            tag,
            "--no-cache",
            "--progress",
            "plain",
            "--ca-bundle",
            str(CA_BUNDLE),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stderr is not None
    deadline = time.monotonic() + 120
    for line in process.stderr:
        if "RUN " in line and "apt-get" in line:
            break
        assert time.monotonic() < deadline
    while not any(marker in command for _, command in engine.containers()):
        assert time.monotonic() < deadline, "the apt step's container never appeared"
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=60)
    assert process.returncode == EXIT_CODES["Interrupted"]
    assert "interrupted; nothing was tagged" in rest
    assert "Traceback" not in rest
    assert not engine.exists(tag)
    # the engine cancels a build whose client went away and removes its container
    deadline = time.monotonic() + 30
    while any(marker in command for _, command in engine.containers()):
        assert time.monotonic() < deadline, "the interrupted build's container is still there"
        time.sleep(0.5)

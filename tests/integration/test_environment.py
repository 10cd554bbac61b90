"""Locks, fingerprints, verify and diff on real images and containers.

A lock is taken from the built cpu-deepspeed image; a build from it with no
cache at all must give the fingerprint of the image it was taken from. A lock
pinning a version pip cannot install must fail the build, saying so. On a
rehearsal cluster whose second node had a package reinstalled at another
version, verify (docker exec and ssh) must name that node and package and
exit 13.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.contract import LABEL_PREFIX
from builder.engine.build import build_image
from builder.errors import BuildError
from builder.fingerprint.compare import differences
from builder.fingerprint.sources import of_container, of_image
from builder.lock.file import lock_path
from builder.resolved import resolve
from builder.spec.loader import load_spec
from tests.integration.conftest import run_between
from tests.integration.images import CA_BUNDLE, IMAGE

if TYPE_CHECKING:
    from pathlib import Path

    from builder.engine import Engine
    from builder.engine.build import BuildResult
    from builder.image.inputs import BuildInputs
    from builder.rehearse.run import Rehearsal

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def locked_stack(
    cpu_image: BuildResult, engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """stack.yaml (the cpu-deepspeed preset, as `builder init` writes it) and its stack.lock."""
    folder = tmp_path_factory.mktemp("locked")
    spec = folder / "stack.yaml"
    result = CliRunner().invoke(app, ["init", "--preset", "cpu-deepspeed", "-o", str(spec)])
    assert result.exit_code == 0, result.stderr
    locked = CliRunner().invoke(app, ["lock", str(spec), "--image", IMAGE])
    assert locked.exit_code == 0, locked.stderr
    assert lock_path(spec).is_file()
    return spec


def build_locked(
    spec: Path, inputs: BuildInputs, engine: Engine, tag: str, *, nocache: bool
) -> str:
    resolved = resolve(load_spec(spec), inputs, lock_of=spec, engine=engine)
    assert resolved.inputs.lock is not None
    reference = f"builder-test/locked:{tag}"
    build_image(resolved, reference=reference, engine=engine, nocache=nocache)
    return reference


def test_a_build_from_the_lock_without_any_cache_has_the_images_fingerprint(
    locked_stack: Path, inputs: BuildInputs, engine: Engine, wheelhouse: Path
) -> None:
    """No layer of the image the lock was taken from is reused (--no-cache): what the lock
    pins alone makes the same environment again, base, packages and prebuilt ops."""
    locked = build_locked(locked_stack, inputs, engine, "a", nocache=True)
    try:
        prints = [of_image(engine, locked), of_image(engine, IMAGE)]
        assert differences(prints)[1] == {}  # the very environment the lock was taken from
        # `builder render` shows the very Dockerfile the locked build used
        assert inputs.base_image is not None
        rendered = CliRunner().invoke(
            app,
            [
                "render",
                str(locked_stack),
                "--base-image",
                inputs.base_image,
                "--ca-bundle",
                str(CA_BUNDLE),
                "--wheelhouse",
                str(wheelhouse),
            ],
        )
        assert rendered.exit_code == 0, rendered.stderr
        assert "-c /tmp/builder/lock.txt" in rendered.stdout
        label = engine.image(locked).labels[f"{LABEL_PREFIX}.dockerfile-sha256"]
        assert hashlib.sha256(rendered.stdout.encode()).hexdigest() == label
    finally:
        engine.remove_image(locked)


def test_a_lock_that_cannot_be_installed_fails_clearly(
    locked_stack: Path, inputs: BuildInputs, engine: Engine, tmp_path: Path
) -> None:
    spec = tmp_path / "stack.yaml"
    spec.write_text(locked_stack.read_text())
    text = lock_path(locked_stack).read_text()
    assert "  einops: 0.8.2\n" in text
    lock_path(spec).write_text(text.replace("  einops: 0.8.2\n", "  einops: 9.9.9\n"))
    with pytest.raises(BuildError) as failure:
        build_locked(spec, inputs, engine, "never", nocache=False)
    message = str(failure.value)
    assert "einops==9.9.9" in message
    assert "This build installs exactly the lock" in message
    assert not engine.exists("builder-test/locked:never")


def test_lock_and_image_diff_clean_and_a_changed_pin_is_named(locked_stack: Path) -> None:
    runner = CliRunner()
    lock_file = str(lock_path(locked_stack))
    same = runner.invoke(app, ["diff", lock_file, IMAGE])
    assert same.exit_code == 0, same.stderr
    changed = locked_stack.parent / "changed.lock"
    changed.write_text(
        lock_path(locked_stack).read_text().replace("einops: 0.8.2", "einops: 0.8.1")
    )
    differ = runner.invoke(app, ["diff", str(changed), IMAGE])
    assert differ.exit_code == 13
    assert "python package einops 0.8.2" in differ.stderr


@pytest.mark.usefixtures("cpu_image", "quiet_machine")  # it times the fingerprint
def test_verify_names_the_drifted_node_and_package(
    other_einops: Path,
    tmp_path: Path,
) -> None:
    reports: dict[str, object] = {}

    def drift_then_verify(rehearsal: Rehearsal) -> None:
        session = rehearsal.session
        engine = session.engine
        first, second = (node.container for node in session.nodes[:2])
        subprocess.run(
            ["docker", "cp", str(other_einops), f"{second}:/tmp/{other_einops.name}"], check=True
        )
        code, out = engine.exec(
            second, ["pip", "install", "-q", "--no-deps", f"/tmp/{other_einops.name}"]
        )
        assert code == 0, out
        start = time.perf_counter()
        of_container(engine, first)
        reports["seconds"] = time.perf_counter() - start
        runner = CliRunner()
        reports["exec"] = runner.invoke(
            app, ["verify", "--containers", f"{first},{second}", "--image", IMAGE]
        )
        # and over ssh into the nodes' sshd, with the bundle's ssh_config, as on a cluster
        hostfile = tmp_path / "hostfile"
        hostfile.write_text(
            "".join(f"{engine.container_ip(c, session.network)} slots=2\n" for c in (first, second))
        )
        reports["ssh"] = runner.invoke(
            app,
            [
                "verify",
                "--hostfile",
                str(hostfile),
                "--ssh-config",
                str(session.folder / "ssh_config"),
            ],
        )

    outcome = run_between(2, "deepspeed", drift_then_verify)
    assert any("einops 0.8.1 (on node1: 0.8.2)" in f.what for f in outcome.faults)
    for way in ("exec", "ssh"):
        result = reports[way]
        assert result.exit_code == 13, (way, result.stderr)  # type: ignore[attr-defined]
        assert "python package einops 0.8.1" in result.stderr, way  # type: ignore[attr-defined]
    assert "node2" in reports["exec"].stderr  # type: ignore[attr-defined]
    assert float(reports["seconds"]) < 5  # type: ignore[arg-type]


def test_fingerprint_of_an_image(engine: Engine, cpu_image: BuildResult) -> None:
    result = CliRunner().invoke(app, ["fingerprint", IMAGE])
    assert result.exit_code == 0, result.stderr
    assert "torch      2.13.0+cpu (CPU)" in result.stdout
    assert "deepspeed  0.19.8" in result.stdout

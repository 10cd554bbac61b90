"""Lock files (text, parsing, checks), locked recipes, and the in-image lock check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from builder.errors import UsageError
from builder.image.inputs import BuildInputs
from builder.image.recipe import image_recipe
from builder.image.render import render_dockerfile
from builder.lock.apply import check_lock
from builder.lock.file import Base, Lock, lock_path, read_lock
from builder.payload import payload_path
from builder.resolved import resolve
from builder.spec.loader import load_preset

LOCK = Lock(
    stack="cpu-deepspeed",
    spec_hash="ab" * 32,
    image="builder/cpu-deepspeed:latest",
    base=Base("debian:bookworm-slim", "sha256:" + "1" * 64, "debian@sha256:" + "2" * 64),
    python={"torch": "2.13.0+cpu", "einops": "0.8.2", "deepspeed": "0.19.8"},
    apt={"pdsh": "2.34-0.1", "g++": "4:12.2.0-3"},
)


def test_text_is_sorted_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "stack.lock"
    path.write_text(LOCK.text())
    assert read_lock(path) == LOCK
    lines = LOCK.text().splitlines()
    python = lines[lines.index("python:") + 1 : lines.index("apt:")]
    assert python == ["  deepspeed: 0.19.8", "  einops: 0.8.2", "  torch: 2.13.0+cpu"]
    assert LOCK.text() == read_lock(path).text()  # stable: diffs show only real changes


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("version: 2\n", "version must be 1"),
        ("[unclosed\n", "not valid YAML"),
        ("version: 1\nstack: x\n", "not a builder lock"),
    ],
)
def test_bad_locks_are_refused(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "stack.lock"
    path.write_text(text)
    with pytest.raises(UsageError, match=fragment):
        read_lock(path)


def test_a_lock_of_another_spec_is_refused() -> None:
    with pytest.raises(UsageError, match="another version of the stack"):
        check_lock(LOCK, "cd" * 32, "stack.lock")
    check_lock(LOCK, "ab" * 32, "stack.lock")


def test_lock_path_sits_beside_the_spec() -> None:
    assert lock_path(Path("a/stack.yaml")) == Path("a/stack.lock")


def test_a_locked_recipe_pins_everything() -> None:
    stack = load_preset("cpu-deepspeed")
    text = render_dockerfile(image_recipe(resolve(stack, BuildInputs(lock=LOCK))))
    assert "FROM debian@sha256:" + "2" * 64 + " AS system" in text
    assert "g++=4:12.2.0-3" in text
    assert "pdsh=2.34-0.1" in text
    pip_lines = [line for line in text.splitlines() if "pip install" in line]
    assert pip_lines
    assert all("-c /tmp/builder/lock.txt" in line for line in pip_lines)
    assert "/opt/venv/bin/python /tmp/builder/lock-check.py /tmp/builder/lock.txt" in text
    unlocked = render_dockerfile(image_recipe(resolve(stack, BuildInputs())))
    assert "lock" not in unlocked


CHECK = payload_path("lock_check.py")
LIST = """
import re
from importlib import metadata
seen = {}
for dist in metadata.distributions():
    if dist.metadata["Name"]:
        seen.setdefault(re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower(), dist.version)
print("\\n".join(f"{name}=={version}" for name, version in seen.items()))
"""


def test_the_in_image_check_passes_exactly_and_names_each_difference(tmp_path: Path) -> None:
    # what a fresh interpreter sees (this test process may have extra paths on sys.path)
    listing = subprocess.run(
        [sys.executable, "-c", LIST], capture_output=True, text=True, check=True
    ).stdout
    installed = dict(line.split("==", 1) for line in listing.splitlines())
    exact = tmp_path / "exact.txt"
    exact.write_text("".join(f"{n}=={v}\n" for n, v in sorted(installed.items())))
    ok = subprocess.run(
        [sys.executable, str(CHECK), str(exact)], capture_output=True, text=True, check=False
    )
    assert ok.returncode == 0, ok.stderr
    assert "exactly as locked" in ok.stdout
    changed = dict(installed, pytest="0.0.1", **{"not-installed": "1.0"})
    changed.pop("typer")
    wrong = tmp_path / "wrong.txt"
    wrong.write_text("".join(f"{n}=={v}\n" for n, v in sorted(changed.items())))
    bad = subprocess.run(
        [sys.executable, str(CHECK), str(wrong)], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 1
    assert f"pytest {installed['pytest']} (lock: 0.0.1)" in bad.stderr
    assert "not-installed missing (lock: 1.0)" in bad.stderr
    assert f"typer {installed['typer']} (lock: not in the lock)" in bad.stderr


def test_render_uses_the_lock_beside_the_spec_as_build_does(tmp_path: Path) -> None:
    from dataclasses import replace

    from typer.testing import CliRunner

    from builder.cli import app
    from builder.image.recipe import spec_hash
    from builder.spec.loader import load_spec

    spec = tmp_path / "stack.yaml"
    runner = CliRunner()
    assert runner.invoke(app, ["init", "--preset", "cpu-deepspeed", "-o", str(spec)]).exit_code == 0
    lock_path(spec).write_text(replace(LOCK, spec_hash=spec_hash(load_spec(spec))).text())

    rendered = runner.invoke(app, ["render", str(spec)])
    assert rendered.exit_code == 0, rendered.stderr
    assert "pdsh=2.34-0.1" in rendered.stdout
    assert "-c /tmp/builder/lock.txt" in rendered.stdout
    assert f"using the lock of {spec} (3 Python, 2 Debian packages)" in rendered.stderr

    unlocked = runner.invoke(app, ["render", str(spec), "--no-lock"])
    assert unlocked.exit_code == 0, unlocked.stderr
    assert "lock.txt" not in unlocked.stdout
    assert "pdsh=" not in unlocked.stdout

    lock_path(spec).write_text(LOCK.text())  # written for another version of the stack
    stale = runner.invoke(app, ["render", str(spec), "-o", str(tmp_path / "out")])
    assert stale.exit_code == 2
    assert "another version of the stack" in stale.stderr
    assert "--no-lock" in stale.stderr
    assert not (tmp_path / "out").exists()

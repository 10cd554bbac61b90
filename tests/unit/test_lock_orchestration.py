"""Taking a lock on the fake engine: which image, base and packages it reads, and
what it refuses (tests/integration locks a real build)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

import builder.cli.environment
from builder.cli import app
from builder.contract import BASE_NAME_LABEL, SPEC_HASH_LABEL
from builder.errors import EXIT_CODES, NotInEngine, UsageError
from builder.lock.file import Base, read_lock
from builder.lock.take import take_lock
from builder.resolved import resolve
from builder.spec.loader import load_preset
from tests.fakes import FakeEngine, FakeImage

if TYPE_CHECKING:
    from pathlib import Path

STACK = load_preset("cpu-deepspeed")
IMAGE = "builder/cpu-deepspeed:latest"
BASE_ID = "sha256:" + "b" * 64
BASE_DIGEST = "debian@sha256:" + "5f0c" * 16
BASE = FakeImage(
    BASE_ID,
    ("debian:bookworm-slim",),
    apt={"base-files": "12.4+deb12u11", "libc6": "2.36-9+deb12u9", "tzdata": "2025a-0"},
    digest=BASE_DIGEST,
)
PYTHON = {"deepspeed": "0.19.8", "numpy": "2.3.1", "torch": "2.13.0"}
APT = {
    "base-files": "12.4+deb12u11",
    "libc6": "2.36-9+deb12u10",  # upgraded over the base's
    "openssh-server": "1:9.2p1-2+deb12u6",
    "pdsh": "2.34-0.1",
    "tzdata": "2025a-0",
}


def built(**labels: str) -> FakeImage:
    return FakeImage("sha256:built", (IMAGE,), labels, packages=dict(PYTHON), apt=dict(APT))


LABELS = {SPEC_HASH_LABEL: "0a1b2c", BASE_NAME_LABEL: "debian:bookworm-slim"}


def test_a_lock_holds_the_base_every_python_package_and_only_the_debs_added() -> None:
    fake = FakeEngine(built(**LABELS), BASE)
    lock = take_lock(resolve(STACK), fake, IMAGE)
    assert lock.stack == "cpu-deepspeed"
    assert lock.spec_hash == "0a1b2c"
    assert lock.image == IMAGE
    assert lock.base == Base("debian:bookworm-slim", BASE_ID, BASE_DIGEST)
    assert lock.python == PYTHON
    assert lock.apt == {
        "libc6": "2.36-9+deb12u10",
        "openssh-server": "1:9.2p1-2+deb12u6",
        "pdsh": "2.34-0.1",
    }
    ran = [call[1:3] for call in fake.called("run")]
    assert ran == [(IMAGE, "python3"), ("debian:bookworm-slim", "dpkg-query")]


def test_an_image_builder_did_not_build_has_no_stack_to_lock() -> None:
    fake = FakeEngine(built(), BASE)
    with pytest.raises(UsageError, match="was not built by builder"):
        take_lock(resolve(STACK), fake, IMAGE)
    fake = FakeEngine(built(**{SPEC_HASH_LABEL: "0a1b2c"}), BASE)
    with pytest.raises(UsageError, match="was not built by builder"):
        take_lock(resolve(STACK), fake, IMAGE)


def test_a_missing_image_or_base_is_not_in_the_engine() -> None:
    with pytest.raises(NotInEngine, match="run `builder build` first") as caught:
        take_lock(resolve(STACK), FakeEngine(BASE), IMAGE)
    assert caught.value.exit_code == 14
    with pytest.raises(NotInEngine, match="base image debian:bookworm-slim"):
        take_lock(resolve(STACK), FakeEngine(built(**LABELS)), IMAGE)


def test_builder_lock_writes_a_lock_that_reads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeEngine(built(**LABELS), BASE)
    monkeypatch.setattr(builder.cli.environment, "connect", lambda: fake)
    target = tmp_path / "stack.lock"
    result = CliRunner().invoke(app, ["lock", "--preset", "cpu-deepspeed", "-o", str(target)])
    assert result.exit_code == 0, result.stderr
    assert "3 Python packages, 3 Debian packages over debian:bookworm-slim" in result.stderr
    assert read_lock(target) == take_lock(resolve(STACK), fake, IMAGE)
    monkeypatch.setattr(builder.cli.environment, "connect", lambda: FakeEngine(BASE))
    result = CliRunner().invoke(app, ["lock", "--preset", "cpu-deepspeed", "-o", str(target)])
    assert result.exit_code == EXIT_CODES["NotInEngine"]

"""One node of the built image, started as `builder` expects (cluster key mounted
read-only): its sshd takes the key, refuses anything else, and an ssh command
sees the container's environment (what pdsh and DeepSpeed rely on)."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

import pytest

from builder.cluster.keys import MOUNT_TARGET, make_keys
from tests.integration.conftest import IMAGE

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from builder.engine import Engine
    from builder.engine.build import BuildResult

pytestmark = pytest.mark.integration


@pytest.fixture
def node(engine: Engine, cpu_image: BuildResult, tmp_path: Path) -> Iterator[str]:
    keys = tmp_path / "cluster"
    make_keys(keys, port=3022, comment="builder-test")
    name = f"builder-test-node-{uuid.uuid4().hex[:8]}"
    container = engine.start(
        IMAGE,
        name=name,
        mounts={str(keys): (MOUNT_TARGET, "ro")},
        environment={"NCCL_DEBUG": "INFO", "TRICKY": "a b $c"},
    )
    try:
        deadline = time.monotonic() + 30
        while engine.exec(container, ["sh", "-c", "test -e /run/sshd.pid"])[0] != 0:
            assert time.monotonic() < deadline, engine.logs(container)
            time.sleep(0.2)
        yield container
    finally:
        engine.remove_container(container)


def test_key_login_sees_the_container_environment(engine: Engine, node: str) -> None:
    code, out = engine.exec(
        node,
        [
            "ssh",
            "localhost",
            'echo "$PATH|$NCCL_DEBUG|$TRICKY"; python -c "import torch"; hostname',
        ],
    )
    assert code == 0, out
    path, rest = out.strip().splitlines()[0].split("|", 1)
    assert path.startswith("/opt/venv/bin:/opt/torch/bin:")
    assert rest == "INFO|a b $c"


def test_no_login_without_the_key(engine: Engine, node: str) -> None:
    code, out = engine.exec(
        node,
        [
            "ssh",
            "-o",
            "PubkeyAuthentication=no",
            "-o",
            "PasswordAuthentication=yes",
            "localhost",
            "true",
        ],
    )
    assert code == 255
    assert "Permission denied" in out


def test_host_key_is_made_at_start_and_differs_per_container(
    engine: Engine, node: str, tmp_path: Path
) -> None:
    first = engine.exec(node, ["cat", "/etc/ssh/ssh_host_ed25519_key.pub"])[1]
    other = engine.start(IMAGE, name=f"builder-test-node-{uuid.uuid4().hex[:8]}")
    try:
        deadline = time.monotonic() + 30
        while engine.exec(other, ["test", "-s", "/etc/ssh/ssh_host_ed25519_key.pub"])[0] != 0:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert engine.exec(other, ["cat", "/etc/ssh/ssh_host_ed25519_key.pub"])[1] != first
    finally:
        engine.remove_container(other)

"""builder.files: the one reader of the files a user hands builder, and the readers and
checks that use it (issue 25). A FIFO cannot be made by the hostile corpus (it holds
files, links and folders), so the FIFO cases are here: a read of one would wait for
ever, so each is refused from its stat, before any open."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.engine.docker import DockerEngine
from builder.errors import EngineUnavailable, RegistryUnreachable, UsageError
from builder.files import check_input, read_bytes, read_input, size_text
from builder.image.pin import read_pin
from builder.image.registry import DIGEST
from builder.launch.sif import sif_build_argv
from builder.lock.file import read_lock, read_lock_beside
from tests.hostile.corpus import GOOD

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

HEX = "1" * 64


def test_a_regular_file_is_read_and_nothing_there_is_none(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    (tmp_path / "link").symlink_to("f")
    assert read_bytes(tmp_path / "f", limit=3) == b"abc"
    assert read_bytes(tmp_path / "link", limit=3) == b"abc"
    assert read_bytes(tmp_path / "missing", limit=3) is None
    assert read_bytes(tmp_path / "missing" / "below", limit=3) is None
    assert check_input(tmp_path / "f", what="x", fix="y") is True
    assert check_input(tmp_path / "missing", what="x", fix="y") is False


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: p.mkdir(), "is a folder"),
        (lambda p: p.symlink_to(p.name), "symlink loop"),
        (lambda p: p.symlink_to("gone"), "symlink to nothing"),
        (os.mkfifo, "not a regular file"),
        (lambda p: p.symlink_to("/dev/zero"), "not a regular file"),
        (lambda p: p.write_bytes(b"x" * 11), "larger than 10 bytes"),
    ],
    ids=["folder", "loop", "dangling", "fifo", "device", "oversized"],
)
def test_anything_but_a_file_within_the_limit_is_refused(
    tmp_path: Path, make: object, says: str
) -> None:
    path = tmp_path / "f"
    make(path)  # type: ignore[operator]
    with pytest.raises(ValueError, match=says):
        read_bytes(path, limit=10)
    with pytest.raises(UsageError, match=f"the thing {path} .*{says}.*; fix it") as caught:
        read_input(path, what="the thing", limit=10, fix="fix it", field="--thing")
    assert (caught.value.field, caught.value.path) == ("--thing", path)
    with pytest.raises(UsageError, match=says):
        check_input(path, what="the thing", fix="fix it", limit=10)


def test_a_path_that_is_not_printable_is_quoted(tmp_path: Path) -> None:
    path = tmp_path / "a\nb"
    path.mkdir()
    with pytest.raises(UsageError) as caught:
        read_input(path, what="x", limit=10, fix="y")
    assert "\n" not in str(caught.value)


def test_sizes_are_said_in_their_unit() -> None:
    assert [size_text(n) for n in (64 * 1024, 4 * 1024 * 1024, 100)] == [
        "64 KiB",
        "4 MiB",
        "100 bytes",
    ]


# --- digests are matched whole -----------------------------------------------------------


@pytest.mark.parametrize("tail", ["\n", "\r\n", " ", "\n\n"])
def test_a_digest_with_anything_after_it_is_no_digest(tail: str) -> None:
    assert DIGEST.fullmatch(f"sha256:{HEX}")
    assert not DIGEST.fullmatch(f"sha256:{HEX}{tail}")
    with pytest.raises(UsageError, match="pinned image"):
        sif_build_argv(f"team/train@sha256:{HEX}{tail}")


def test_a_push_whose_digest_has_a_line_break_has_no_digest() -> None:
    from builder.engine.push import push_image

    class Engine:
        def push(self, _reference: str) -> Iterator[dict[str, object]]:
            yield {"aux": {"Tag": "1.0", "Digest": f"sha256:{HEX}\n", "Size": 1}}

    with pytest.raises(RegistryUnreachable, match="without the registry's digest"):
        push_image(Engine(), "localhost:5000/t:1.0")  # type: ignore[arg-type]


def test_a_record_whose_digest_has_a_line_break_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "stack.yaml"
    record = {"schema": 1, "reference": "builder/stack:latest", "digest": f"sha256:{HEX}\n"}
    (tmp_path / "stack.digest").write_text(json.dumps(record))
    with pytest.raises(UsageError, match=r"stack\.digest"):
        read_pin(spec)
    record["digest"] = f"sha256:{HEX}"
    (tmp_path / "stack.digest").write_text(json.dumps(record))
    assert read_pin(spec) is not None


# --- the files beside the spec --------------------------------------------------------------


@pytest.mark.parametrize(
    "content", ["[" * 30_000 + "]" * 30_000, "1" * 50_000, '{"schema": 1e999}', "\xff"]
)
def test_a_record_that_is_no_json_record_is_a_usage_error(tmp_path: Path, content: str) -> None:
    (tmp_path / "stack.digest").write_text(content)
    with pytest.raises(UsageError, match=r"stack\.digest"):
        read_pin(tmp_path / "stack.yaml")


def test_a_lock_beside_the_spec_that_is_a_folder_is_not_ignored(tmp_path: Path) -> None:
    assert read_lock_beside(tmp_path / "stack.yaml") is None
    (tmp_path / "stack.lock").mkdir()
    with pytest.raises(UsageError, match=r"stack\.lock is a folder.*--no-lock"):
        read_lock_beside(tmp_path / "stack.yaml")
    with pytest.raises(UsageError, match="is a folder"):
        read_lock(tmp_path / "stack.lock")
    with pytest.raises(UsageError, match="does not exist"):
        read_lock(tmp_path / "other.lock")


# --- FIFOs, through the command line: refused, never waited on --------------------------


def _no_engine(cls: type[DockerEngine], timeout: int = 0) -> DockerEngine:
    raise EngineUnavailable("no engine: options must be refused first")


FIFO_CASES = [
    (["launch", "stack.yaml"], "stack.digest", "stack.digest"),
    (["push", "stack.yaml"], "stack.digest", "stack.digest"),
    (["render", "stack.yaml"], "stack.lock", "stack.lock"),
    (["build", "stack.yaml"], "stack.lock", "stack.lock"),
    (["render", "fifo.yaml"], "fifo.yaml", "fifo.yaml"),
    (["render", "stack.yaml", "--ca-bundle", "ca.pem"], "ca.pem", "--ca-bundle"),
    (["ship", "stack.yaml", "--ssh-config", "cfg"], "cfg", "--ssh-config"),
    (["verify", "--hostfile", "h"], "h", "--hostfile"),
    (["rehearse", "stack.yaml", "--script", "s.py"], "s.py", "--script"),
    (["bundle", "stack.yaml", "-o", "cluster"], "cluster/id_ed25519", "cluster/id_ed25519"),
    (["lock", "stack.yaml", "-o", "x.lock"], "x.lock", "-o x.lock"),
]


@pytest.mark.parametrize(("args", "fifo", "says"), FIFO_CASES, ids=[c[1] for c in FIFO_CASES])
def test_a_fifo_is_refused_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], fifo: str, says: str
) -> None:
    (tmp_path / "stack.yaml").write_text(GOOD)
    if fifo.startswith("cluster/"):
        (tmp_path / "cluster").mkdir(mode=0o700)
    os.mkfifo(tmp_path / fifo)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(DockerEngine, "connect", classmethod(_no_engine))
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.stderr
    assert says in result.stderr
    assert "regular file" in result.stderr

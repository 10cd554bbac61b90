"""Every case of the hostile-input corpus through the real CLI, in a fresh folder.

What the README promises for bad input: the documented exit code, one clear
paragraph naming the field (with its YAML line) or the option, no traceback,
and nothing written or changed on disk. The folder is snapshotted (every
path, its bytes or link target, its mode, and the folder's own mode) before
and after. The engine address points nowhere, so a command that connects
before checking its options exits 10 and fails its case.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.engine.docker import DockerEngine
from builder.errors import EXIT_CODES, EngineUnavailable
from tests.hostile.corpus import CASES, Case

if TYPE_CHECKING:
    from pathlib import Path

Snapshot = dict[str, tuple[int, bytes]]

MAX_MESSAGE = 4000
"""A message longer than this repeats a value it should have shortened."""


def _snapshot(root: Path) -> Snapshot:
    found: Snapshot = {".": (root.lstat().st_mode, b"")}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            content = str(path.readlink()).encode()
        elif stat.S_ISREG(info.st_mode):
            content = path.read_bytes()
        else:
            content = b""
        found[str(path.relative_to(root))] = (info.st_mode, content)
    return found


def _prepare(case: Case, root: Path) -> None:
    for name, mode in case.dirs.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name).chmod(mode)
    for name, content in case.files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    for name, target in case.links.items():
        (root / name).symlink_to(target)


def _no_engine(cls: type[DockerEngine], timeout: int = 0) -> DockerEngine:
    raise EngineUnavailable("no engine in the hostile corpus: options must be refused first")


def _message(stderr: str) -> str:
    """The error paragraph: stderr without click's usage preamble."""
    lines = [
        line for line in stderr.strip().splitlines() if not line.startswith(("Usage: ", "Try '"))
    ]
    return "\n".join(lines).strip()


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_hostile_input(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "work"
    root.mkdir()
    root.chmod(0o755)
    _prepare(case, root)
    monkeypatch.chdir(root)
    for name in [n for n in os.environ if n.startswith("SLURM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(DockerEngine, "connect", classmethod(_no_engine))
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    before = _snapshot(root)

    result = CliRunner().invoke(app, list(case.args), input=case.stdin)

    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"escaped as {type(result.exception).__name__}") from (
            result.exception
        )
    message = _message(result.stderr)
    assert result.exit_code == case.code, message[:2000]
    assert result.exit_code in EXIT_CODES.values()
    assert "Traceback" not in result.output
    assert message, "no message on stderr"
    assert "\n\n" not in message, "more than one paragraph"
    assert len(message) < MAX_MESSAGE, f"{len(message)} characters: a value is shown whole"
    assert case.says.lower() in message.lower(), message
    assert _snapshot(root) == before, "the folder changed"


def test_the_corpus_is_large_and_covers_every_command() -> None:
    from builder.cli.app import COMMANDS

    assert len(CASES) >= 200
    assert len({c.id for c in CASES}) == len(CASES), "case ids repeat"
    commands = {c.args[0] for c in CASES if c.args}
    assert set(COMMANDS) <= commands, set(COMMANDS) - commands

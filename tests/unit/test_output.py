"""write_files: every check before the first byte, then all files or none; an
existing folder's mode and owner are never changed."""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING

import pytest

from builder.errors import OutputExists, UsageError
from builder.output import OutputFile, write_files

if TYPE_CHECKING:
    from pathlib import Path

FILES = [
    OutputFile("Dockerfile", 0o644, "FROM scratch\n"),
    OutputFile("rootfs/etc/ssh/sshd_config", 0o644, "Port 3022\n"),
    OutputFile("secret", 0o600, "key\n"),
]


def snapshot(root: Path) -> dict[str, tuple[int, str | None]]:
    """Every path under root: its mode and, for a file, its text."""
    return {
        str(p.relative_to(root)): (
            p.lstat().st_mode,
            p.read_text() if p.is_file() and not p.is_symlink() else None,
        )
        for p in sorted(root.rglob("*"))
    }


def test_writes_every_file_with_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "out"
    written = write_files(FILES, out, force=False)
    assert written == [out / f.path for f in FILES]
    assert (out / "rootfs/etc/ssh/sshd_config").read_text() == "Port 3022\n"
    assert stat.S_IMODE((out / "secret").stat().st_mode) == 0o600
    assert stat.S_IMODE((out / "Dockerfile").stat().st_mode) == 0o644
    assert not list(out.rglob("*.tmp"))


@pytest.mark.parametrize(
    ("setup", "error", "says"),
    [
        ({"rootfs": "a file"}, UsageError, "rootfs is a file"),  # a parent that is a file
        ({"rootfs/etc": "a file"}, UsageError, "etc is a file"),
        ({"Dockerfile/": None}, UsageError, "Dockerfile is a folder"),  # a target that is a folder
        ({"Dockerfile": "FROM debian\n"}, OutputExists, "--force"),
    ],
)
def test_a_refusal_writes_nothing(
    tmp_path: Path, setup: dict[str, str | None], error: type[Exception], says: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for name, text in setup.items():
        path = out / name.rstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            path.mkdir()
        else:
            path.write_text(text)
    before = snapshot(out)
    with pytest.raises(error, match=says):
        write_files(FILES, out, force=False)
    assert snapshot(out) == before


def test_force_replaces_files_never_folders(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "Dockerfile").mkdir(parents=True)
    (out / "secret").write_text("old\n")
    before = snapshot(out)
    with pytest.raises(UsageError, match="is a folder"):
        write_files(FILES, out, force=True)
    assert snapshot(out) == before
    (out / "Dockerfile").rmdir()
    write_files(FILES, out, force=True)
    assert (out / "secret").read_text() == "key\n"


def test_the_output_folder_itself_a_file(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("mine\n")
    with pytest.raises(UsageError, match="out is a file"):
        write_files(FILES, tmp_path / "out", force=True)
    assert (tmp_path / "out").read_text() == "mine\n"


def test_symlinks_out_of_the_folder_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "sshd_config").write_text("theirs\n")
    out = tmp_path / "out"
    (out / "rootfs/etc").mkdir(parents=True)
    (out / "rootfs/etc/ssh").symlink_to(outside)  # a folder on the way
    with pytest.raises(UsageError, match="outside"):
        write_files(FILES, out, force=True)
    (out / "rootfs/etc/ssh").unlink()
    (out / "secret").symlink_to(outside / "sshd_config")  # the target itself
    with pytest.raises(UsageError, match="symlink"):
        write_files(FILES, out, force=True)
    assert (outside / "sshd_config").read_text() == "theirs\n"
    assert sorted(p.name for p in outside.iterdir()) == ["sshd_config"]


def test_a_link_inside_the_folder_is_replaced_not_followed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "other").write_text("kept\n")
    (out / "Dockerfile").symlink_to(out / "other")
    write_files(FILES, out, force=True)
    assert not (out / "Dockerfile").is_symlink()
    assert (out / "other").read_text() == "kept\n"


def test_an_existing_folder_keeps_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    out.chmod(0o751)
    write_files(FILES, out, force=False)
    assert stat.S_IMODE(out.stat().st_mode) == 0o751


def test_private_folders_are_made_0700_and_open_ones_refused(tmp_path: Path) -> None:
    out = tmp_path / "new" / "keys"
    write_files(FILES, out, force=False, private=True)
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert stat.S_IMODE((out / "rootfs").stat().st_mode) == 0o700
    assert stat.S_IMODE(out.parent.stat().st_mode) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp
    with pytest.raises(UsageError, match=r"mode 1777.*chmod 700"):
        write_files(FILES, shared, force=True, private=True)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert list(shared.iterdir()) == []


def test_a_symlinked_output_folder_keeps_its_target_mode(tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.mkdir()
    target.chmod(0o700)
    (tmp_path / "link").symlink_to(target)
    write_files(FILES, tmp_path / "link", force=False, private=True)
    assert (target / "secret").read_text() == "key\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o700


def test_a_failed_write_leaves_no_temporary_file_or_new_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    out = tmp_path / "out"
    out.mkdir()
    (out / "Dockerfile").write_text("old\n")
    calls: list[str] = []

    def mkstemp(**kwargs: str) -> tuple[int, str]:
        calls.append(kwargs["prefix"])
        if len(calls) == 3:  # the disk fills up at the third file
            raise OSError(28, "No space left on device")
        return tempfile.mkstemp(**kwargs)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr("builder.output.tempfile.mkstemp", mkstemp)
    with pytest.raises(UsageError, match=r"No space left on device.*nothing was written"):
        write_files(FILES, out, force=True)
    assert len(calls) == 3
    assert sorted(p.name for p in out.rglob("*")) == ["Dockerfile"]
    assert (out / "Dockerfile").read_text() == "old\n"


def test_paths_must_stay_inside(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a path inside"):
        write_files([OutputFile("../x", 0o644, "")], tmp_path / "out", force=True)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("at", [1, 3])
def test_ctrl_c_while_staging_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: int
) -> None:
    """Ctrl-C is no OSError: the temporary files and the folders made for them go too,
    and the interrupt goes on to the caller."""
    import os

    out = tmp_path / "out"
    out.mkdir()
    real_fdopen = os.fdopen
    calls: list[int] = []

    def fdopen(fd: int, *args: object, **kwargs: object) -> object:
        calls.append(fd)
        if len(calls) == at:  # Ctrl-C while this file's text is being written
            os.close(fd)
            raise KeyboardInterrupt
        return real_fdopen(fd, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("builder.output.os.fdopen", fdopen)
    with pytest.raises(KeyboardInterrupt):
        write_files(FILES, out, force=False)
    assert list(out.rglob("*")) == []  # no .*.tmp, and rootfs/ made for one is gone


def test_ctrl_c_before_the_renames_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path as RealPath

    out = tmp_path / "out"
    out.mkdir()
    (out / "Dockerfile").write_text("old\n")

    def replace(self: Path, target: Path) -> Path:
        raise KeyboardInterrupt

    monkeypatch.setattr(RealPath, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        write_files(FILES, out, force=True)
    assert sorted(p.name for p in out.rglob("*")) == ["Dockerfile"]
    assert (out / "Dockerfile").read_text() == "old\n"


def test_ctrl_c_during_render_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from builder.cli import app

    real = write_files.__globals__["_stage"]
    staged: list[object] = []

    def stage(target: object) -> Path:
        staged.append(target)
        if len(staged) == 2:
            raise KeyboardInterrupt
        return real(target)  # type: ignore[no-any-return]

    monkeypatch.setattr("builder.output._stage", stage)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["render", "--preset", "cpu-deepspeed", "-o", "out"])
    assert result.exit_code != 0
    assert len(staged) == 2
    assert [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("links", [{"out": "out"}, {"out": "other", "other": "out"}])
def test_an_output_folder_in_a_symlink_loop_is_a_usage_error(
    tmp_path: Path, links: dict[str, str]
) -> None:
    for name, target in links.items():
        (tmp_path / name).symlink_to(target)
    with pytest.raises(UsageError, match="leads back to itself"):
        write_files(FILES, tmp_path / "out", force=True)
    with pytest.raises(UsageError, match="leads back to itself"):
        write_files(FILES, tmp_path / "out" / "inner", force=True)

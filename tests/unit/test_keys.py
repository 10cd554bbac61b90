"""Cluster keys: real ssh-keygen, modes, and never clobbering a key in use."""

from __future__ import annotations

import stat
import subprocess
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.cluster.keys import FILES, make_keys
from builder.errors import OutputExists

if TYPE_CHECKING:
    from pathlib import Path


def test_pair_authorized_keys_and_config(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    make_keys(folder, port=3022, comment="builder-test")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()} == dict.fromkeys(
        FILES, 0o600
    )
    public = (folder / "id_ed25519.pub").read_text()
    assert public.startswith("ssh-ed25519 ")
    assert public.rstrip().endswith("builder-test")
    assert (folder / "authorized_keys").read_text() == public
    # the private key is a real one: ssh-keygen derives the same public key from it
    derived = subprocess.run(
        ["ssh-keygen", "-y", "-f", str(folder / "id_ed25519")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert derived.split()[:2] == public.split()[:2]
    config = (folder / "ssh_config").read_text()
    assert "    Port 3022\n" in config
    assert f"    IdentityFile {(folder / 'id_ed25519').resolve()}\n" in config


def test_an_existing_key_is_kept_unless_forced(tmp_path: Path) -> None:
    make_keys(tmp_path, port=3022, comment="a")
    first = (tmp_path / "id_ed25519").read_text()
    with pytest.raises(OutputExists, match="locks out every node"):
        make_keys(tmp_path, port=3022, comment="b")
    assert (tmp_path / "id_ed25519").read_text() == first
    make_keys(tmp_path, port=3022, comment="b", force=True)
    assert (tmp_path / "id_ed25519").read_text() != first
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".keys-")]


def test_cli_uses_the_stack_port(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["keys", "--preset", "cpu-deepspeed", "-o", str(tmp_path / "c")]
    )
    assert result.exit_code == 0, result.stderr
    assert "Port 3022" in (tmp_path / "c" / "ssh_config").read_text()
    again = CliRunner().invoke(
        app, ["keys", "--preset", "cpu-deepspeed", "-o", str(tmp_path / "c")]
    )
    assert again.exit_code == 3

"""Cluster keys: real ssh-keygen, modes, and never clobbering a key in use."""

from __future__ import annotations

import stat
import subprocess
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.cluster.folder import RECORD
from builder.cluster.keys import FILES, HOST_KEY_ALIAS, make_keys, node_ssh_config
from builder.errors import OutputExists, UsageError
from tests.conftest import real_tool

if TYPE_CHECKING:
    from pathlib import Path


def test_pair_authorized_keys_and_config(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    make_keys(folder, port=3022, comment="builder-test")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()} == dict.fromkeys(
        (*FILES, RECORD), 0o600
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
    host_public = (folder / "ssh_host_ed25519_key.pub").read_text().split()
    assert host_public[:2] != public.split()[:2]  # two pairs, not one
    assert (folder / "ssh_known_hosts").read_text() == (
        f"{HOST_KEY_ALIAS} {host_public[0]} {host_public[1]}\n"
    )
    config = (folder / "ssh_config").read_text()
    assert "    Port 3022\n" in config
    assert f'    IdentityFile "{(folder / "id_ed25519").resolve()}"\n' in config


def test_the_host_side_config_pins_the_cluster_host_key(tmp_path: Path) -> None:
    folder = tmp_path / "100% cluster"  # ssh_config expands % and splits on blanks
    make_keys(folder, port=3022, comment="builder-test")
    effective = subprocess.run(
        [real_tool("ssh"), "-G", "-F", str(folder / "ssh_config"), "10.0.0.7"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert "stricthostkeychecking true" in effective
    assert f"hostkeyalias {HOST_KEY_ALIAS}" in effective
    assert f"userknownhostsfile {folder.resolve() / 'ssh_known_hosts'}" in effective
    # -G shows IdentityFile before its % tokens are expanded (at use, %% is %)
    escaped = str(folder.resolve() / "id_ed25519").replace("%", "%%")
    assert f"identityfile {escaped}" in effective
    assert "globalknownhostsfile none" in effective


def test_the_node_config_names_only_the_cluster(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(node_ssh_config(["node1", "10.0.0.2"], 3022))

    def effective(host: str) -> list[str]:
        return subprocess.run(
            [real_tool("ssh"), "-G", "-F", str(config), host],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()

    for host in ("node1", "10.0.0.2"):
        assert "stricthostkeychecking true" in effective(host)
        assert "port 3022" in effective(host)
        assert "userknownhostsfile none" in effective(host)
    other = effective("github.com")
    assert "stricthostkeychecking ask" in other  # ssh's default, not weakened
    assert "port 22" in other
    assert not [line for line in other if line.startswith("hostkeyalias")]
    with pytest.raises(UsageError, match=r"launch\.nodes"):
        node_ssh_config(["node*"], 3022)


def test_an_open_folder_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o755)
    with pytest.raises(UsageError, match="chmod 700"):
        make_keys(folder, port=3022, comment="x")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert list(folder.iterdir()) == []


def test_an_existing_key_is_kept_unless_forced(tmp_path: Path) -> None:
    make_keys(tmp_path, port=3022, comment="a")
    first = (tmp_path / "id_ed25519").read_text()
    with pytest.raises(OutputExists, match="locks out every node"):
        make_keys(tmp_path, port=3022, comment="b")
    assert (tmp_path / "id_ed25519").read_text() == first
    make_keys(tmp_path, port=3022, comment="b", force=True)
    assert (tmp_path / "id_ed25519").read_text() != first
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") and p.name != RECORD]


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


def test_cli_onto_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "c").write_text("mine\n")
    result = CliRunner().invoke(app, ["keys", "-o", str(tmp_path / "c")])
    assert result.exit_code == 2
    assert "is a file" in result.stderr
    assert (tmp_path / "c").read_text() == "mine\n"

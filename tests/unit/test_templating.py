"""The compiled-template cache: used when safe, never stale, never in the way."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from builder.errors import UsageError
from builder.templating import CACHE_ENV, cache_folder, docker_value

if TYPE_CHECKING:
    from pathlib import Path

RENDER = (
    "from builder.image.context import render_outputs\n"
    "from builder.spec.loader import load_preset\nfrom builder.resolved import resolve\n"
    "for name in ('cpu-deepspeed', 'cuda-torchrun'):\n"
    "    for f in render_outputs(resolve(load_preset(name)), 'all'):\n"
    "        print(f.path); print(f.text)\n"
)


def render(cache: str) -> str:
    """Every file of two presets, rendered by a fresh interpreter with this cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env[CACHE_ENV] = cache
    return subprocess.run(
        [sys.executable, "-c", RENDER], capture_output=True, text=True, check=True, env=env
    ).stdout


def test_a_cached_render_is_the_same_render(tmp_path: Path) -> None:
    fresh = render("off")
    assert render(str(tmp_path)) == fresh
    (folder,) = tmp_path.iterdir()
    assert len(list(folder.iterdir())) >= 4  # Dockerfile, .def, sshd/ssh config, entrypoint
    assert folder.stat().st_mode & 0o777 == 0o700
    assert render(str(tmp_path)) == fresh  # now from the cache


def test_compiled_code_of_another_source_is_not_used(tmp_path: Path) -> None:
    """What an edited template leaves behind: compiled code whose source is not the
    template's any more. Jinja's checksum refuses it and compiles afresh."""
    fresh = render("off")
    render(str(tmp_path))
    (folder,) = tmp_path.iterdir()
    entries = sorted(folder.iterdir(), key=lambda p: p.stat().st_size)
    for entry in entries[1:]:
        shutil.copyfile(entries[0], entry)  # every template's key, one template's code
    assert render(str(tmp_path)) == fresh
    for entry in entries:
        entry.write_bytes(b"not a cache entry")
    assert render(str(tmp_path)) == fresh


def test_a_folder_that_is_not_private_or_not_a_folder_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    folder = cache_folder("3.1.6")
    assert folder is not None
    assert folder.parent == tmp_path
    folder.chmod(0o777)
    assert cache_folder("3.1.6") is None
    assert cache_folder("3.2.0") is not None  # another Jinja: another folder
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv(CACHE_ENV, str(blocked))
    assert cache_folder("3.1.6") is None
    monkeypatch.setenv(CACHE_ENV, "off")
    assert cache_folder("3.1.6") is None
    assert render(str(blocked)) == render("off")


@pytest.mark.parametrize("value", ["a\nRUN curl x | sh", "a\rb", "a\u2028b"])
def test_a_dockerfile_value_with_a_line_break_is_refused(value: str) -> None:
    with pytest.raises(UsageError, match="line break"):
        docker_value(value)

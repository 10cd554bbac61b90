"""The README's reference tables stay true to the code."""

from __future__ import annotations

import re
from pathlib import Path

from builder.errors import EXIT_CODES
from builder.model import field_names
from builder.spec import ImageSpec, LaunchSpec, Spec
from builder.spec.presets import preset_names

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_exit_code_table_matches_errors() -> None:
    table = dict(re.findall(r"^\| (\d+) \| .*\(`(\w+)`\) \|$", README, flags=re.M))
    assert {name: int(code) for code, name in table.items()} == EXIT_CODES


def test_every_preset_is_described() -> None:
    listed = re.findall(r"^\| `([a-z-]+)`", README, flags=re.M)
    assert [name for name in listed if name in preset_names()] == sorted(
        preset_names(), key=listed.index
    )
    assert set(preset_names()) <= set(listed)


def test_every_spec_key_is_documented() -> None:
    for model in (Spec, ImageSpec, LaunchSpec):
        for field in field_names(model):
            assert f"`{field}" in README, f"{model.__name__}.{field} is not in the README"


def test_quick_start_commands_exist_in_the_makefile() -> None:
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    for target in re.findall(r"^make (\w[\w-]*)", README, flags=re.M):
        assert re.search(rf"^{target}:", makefile, flags=re.M), target

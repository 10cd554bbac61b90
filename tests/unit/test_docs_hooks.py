"""The reference pages docs/hooks.py generates at every site build name everything they
stand for: every command and each of its options, every spec key at the top, every exit
code, preset and public name. scripts/typer-bounds.sh runs these under the oldest and the
newest typer allowed, whose parameter objects differ."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import builder
from builder.cli.app import COMMANDS
from builder.errors import EXIT_CODES
from builder.spec.presets import preset_names

if TYPE_CHECKING:
    from types import ModuleType

HOOKS = Path(__file__).resolve().parents[2] / "docs" / "hooks.py"


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", HOOKS)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_page_has_every_command_and_option(hooks: ModuleType) -> None:
    page: str = hooks.cli_page()
    group, ctx = hooks.command_tree()
    for name in COMMANDS:
        assert f"## `builder {name}`" in page
        command = group.get_command(ctx, name)
        for param in command.params:
            if getattr(param, "hidden", False):  # kept for old scripts, not shown
                continue
            for option in param.opts:
                if option.startswith("-"):
                    assert option in page, f"builder {name} {option} is not on the page"


def test_the_other_pages_name_what_they_stand_for(hooks: ModuleType) -> None:
    schema: str = hooks.schema_page()
    assert all(f"`{key}`" in schema for key in ("image", "launch", "name"))
    codes: str = hooks.exit_codes_page()
    assert all(f"| {code} |" in codes for code in EXIT_CODES.values())
    presets: str = hooks.presets_page()
    assert all(name in presets for name in preset_names())
    api: str = hooks.api_page()
    assert all(f"`{name}`" in api for name in builder.__all__ if name != "__version__")

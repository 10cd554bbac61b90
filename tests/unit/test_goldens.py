"""dockerfiles/ and apptainer/ hold every preset's rendered output; they must not drift.

Regenerate with `make render` and review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.image.context import render_outputs
from builder.resolved import resolve
from builder.spec.loader import load_preset
from builder.spec.presets import preset_names

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("fmt", ["docker", "apptainer"])
@pytest.mark.parametrize("name", preset_names())
def test_committed_outputs_match_the_code(name: str, fmt: str) -> None:
    folder = ROOT / ("dockerfiles" if fmt == "docker" else "apptainer") / name
    expected = {f.path: f.text for f in render_outputs(resolve(load_preset(name)), fmt)}  # type: ignore[arg-type]
    actual = {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*") if p.is_file()}
    assert actual == expected, f"{folder} is stale: run `make render` and review the diff"


def test_no_outputs_for_presets_that_do_not_exist() -> None:
    for top in ("dockerfiles", "apptainer"):
        assert sorted(p.name for p in (ROOT / top).iterdir() if p.is_dir()) == preset_names()

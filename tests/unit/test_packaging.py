"""The wheel a user installs carries the templates, presets and py.typed."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from builder.spec.presets import preset_names

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "builder" / "templates").rglob("*.j2"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel as `python -m build` makes it from this checkout."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("multinode_builder-*.whl")
    return built


@pytest.mark.slow
def test_wheel_ships_templates_presets_and_entry_point(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert TEMPLATES, "no templates found in the source tree"
    for template in TEMPLATES:
        assert template in names
    for preset in preset_names():
        assert f"builder/spec/presets/{preset}.yaml" in names
    assert "builder/py.typed" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "builder = builder.cli:main" in text
    assert not any(n.startswith(("tests/", "dockerfiles/", "bench/")) for n in names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert "\nName: multinode-builder\n" in zipfile.ZipFile(wheel).read(metadata).decode()


@pytest.mark.slow
def test_installed_wheel_renders_outside_the_source_tree(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--quiet",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
    )
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import builder, builder.image.context as c, builder.spec.loader as l;"
        "assert builder.__file__.startswith(sys.argv[1]);"
        "stack = builder.resolve(l.load_preset('cuda-deepspeed'));"
        "print(c.render_outputs(stack, 'docker')[0].text)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(target)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "FROM nvidia/cuda:" in result.stdout


def test_every_install_hint_names_our_distribution() -> None:
    """`builder` on PyPI is an unrelated 2015 project with its own top-level package:
    a hint or README line saying `pip install builder` would install that instead."""
    texts = {p: p.read_text() for p in [ROOT / "README.md", *(ROOT / "builder").rglob("*.py")]}
    pattern = re.compile(r"pip install\s+(-\S+\s+)*['\"]?builder\b")
    offenders = [str(p.relative_to(ROOT)) for p, text in texts.items() if pattern.search(text)]
    assert not offenders
    assert 'name = "multinode-builder"' in (ROOT / "pyproject.toml").read_text()

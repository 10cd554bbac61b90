"""What a release ships and what a newcomer gets: the wheel carries the templates, presets,
py.typed, the license and the metadata PyPI shows; the sdist carries what the tests
need; the version lives in one place with a changelog entry; `make demo` ends with
commands the CLI takes."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

import builder
from builder.cli import app
from builder.spec.presets import preset_names

if TYPE_CHECKING:
    from email.message import Message

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "builder" / "templates").rglob("*.j2"))
PYPROJECT = (ROOT / "pyproject.toml").read_text()
URL_NAMES = ("Homepage", "Documentation", "Repository", "Changelog", "Issues")


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist and the wheel as `python -m build` makes them from this checkout; the
    wheel is built from the unpacked sdist, so a file the sdist lacks fails here."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (sdist,) = out.glob("multinode_builder-*.tar.gz")
    (wheel,) = out.glob("multinode_builder-*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def wheel(dists: tuple[Path, Path]) -> Path:
    return dists[1]


@pytest.fixture(scope="module")
def sdist(dists: tuple[Path, Path]) -> Path:
    return dists[0]


def wheel_metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(archive.read(name).decode())


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
    assert wheel_metadata(wheel)["Name"] == "multinode-builder"


@pytest.mark.slow
def test_wheel_metadata_is_ready_for_a_release(wheel: Path) -> None:
    meta = wheel_metadata(wheel)
    assert meta["Version"] == builder.__version__
    # PEP 639: the SPDX expression and the file; a License :: classifier beside them is
    # deprecated, and PyPI refuses the upload
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    classifiers = meta.get_all("Classifier") or []
    assert not [c for c in classifiers if c.startswith("License ::")]
    for wanted in ("Operating System :: POSIX :: Linux", "Typing :: Typed"):
        assert wanted in classifiers
    assert any(c.startswith("Topic :: ") for c in classifiers)
    # one classifier per Python minor version from requires-python's lowest on, no gaps
    lowest = re.fullmatch(r">=3\.(\d+)", meta["Requires-Python"])
    assert lowest is not None
    minors = sorted(
        int(c.rsplit(".", 1)[1])
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    )
    assert minors == list(range(int(lowest[1]), int(lowest[1]) + len(minors)))
    assert len(minors) >= 2
    urls = dict(url.split(", ", 1) for url in meta.get_all("Project-URL") or [])
    assert sorted(urls) == sorted(URL_NAMES)
    assert all(url.startswith("https://") for url in urls.values())
    with zipfile.ZipFile(wheel) as archive:
        (licence,) = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(licence) == (ROOT / "LICENSE").read_bytes()


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


def test_the_license_is_the_whole_apache_2_0_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    for section in range(1, 10):
        assert f"\n   {section}. " in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert '\nlicense = "Apache-2.0"\n' in PYPROJECT


def shipped_files() -> set[str]:
    """The files of this checkout that belong to the project: tracked or new, not ignored
    (git decides; outside a git work tree, as in an unpacked sdist, nothing is checked)."""
    if not (ROOT / ".git").exists():
        return set()
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\0")
    return {name for name in listed if name and (ROOT / name).is_file()}


@pytest.mark.slow
def test_sdist_carries_the_sources_tests_and_license(sdist: Path) -> None:
    with tarfile.open(sdist) as archive:
        prefix = f"multinode_builder-{builder.__version__}/"
        names = {m.name.removeprefix(prefix) for m in archive.getmembers() if m.isfile()}
        pkg_info = archive.extractfile(prefix + "PKG-INFO")
        assert pkg_info is not None
        meta = Parser().parsestr(pkg_info.read().decode())
    for wanted in ("LICENSE", "CHANGELOG.md", "README.md", "Makefile", "pyproject.toml"):
        assert wanted in names
    assert meta["Version"] == builder.__version__
    assert meta.get_all("License-File") == ["LICENSE"]
    # everything the tests, goldens, benchmarks, scripts and docs need: the whole project
    # but for git's own files
    missing = sorted(shipped_files() - names - {".gitignore"})
    assert not missing, f"not in the sdist ([tool.hatch.build.targets.sdist]): {missing}"
    assert not [n for n in names if "__pycache__" in n or n.startswith((".venv/", "build/"))]


def changelog_versions() -> list[str]:
    text = (ROOT / "CHANGELOG.md").read_text()
    return re.findall(r"^## \[([^\]]+)\]", text, flags=re.MULTILINE)


def test_the_version_has_a_changelog_entry() -> None:
    """Keep a Changelog: the newest release first, an optional [Unreleased] above it."""
    versions = [v for v in changelog_versions() if v != "Unreleased"]
    assert versions, "CHANGELOG.md has no release section"
    assert versions[0] == builder.__version__


def test_the_version_lives_in_one_place() -> None:
    """builder/_version.py: hatch reads it, builder reports it; nothing else spells it."""
    assert '\ndynamic = ["version"]\n' in PYPROJECT
    assert not re.search(r"^version\s*=", PYPROJECT, flags=re.MULTILINE)
    assert '[tool.hatch.version]\npath = "builder/_version.py"\n' in PYPROJECT
    literal = re.compile(rf"['\"]{re.escape(builder.__version__)}['\"]")
    spelled = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "builder").rglob("*.py")
        if path.name != "_version.py" and literal.search(path.read_text())
    ]
    assert not spelled


def test_every_install_hint_names_our_distribution() -> None:
    """`builder` on PyPI is an unrelated 2015 project with its own top-level package:
    a hint or README line saying `pip install builder` would install that instead."""
    texts = {p: p.read_text() for p in [ROOT / "README.md", *(ROOT / "builder").rglob("*.py")]}
    pattern = re.compile(r"pip install\s+(-\S+\s+)*['\"]?builder\b")
    offenders = [str(p.relative_to(ROOT)) for p, text in texts.items() if pattern.search(text)]
    assert not offenders
    assert '\nname = "multinode-builder"\n' in PYPROJECT


def demo_commands() -> list[list[str]]:
    """The `builder ...` commands make demo prints for a real cluster, without comments."""
    recipe = (ROOT / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    lines = re.findall(r'^\t@echo "  (builder .*)"$', recipe, flags=re.MULTILINE)
    return [shlex.split(line, comments=True)[1:] for line in lines]


def test_make_demo_ends_with_commands_the_cli_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Those that need neither an engine nor nodes run as printed (preflight as a dry run),
    in order, in a fresh folder; the rest must parse (an unknown option fails --help)."""
    commands = demo_commands()
    assert [c[0] for c in commands] == ["init", "build", "push", "bundle", "preflight"]
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for args in commands:
        local = args[0] in {"init", "bundle", "preflight"}
        argv = [*args, "--dry-run"] if args[0] == "preflight" else args
        result = runner.invoke(app, argv if local else [*args, "--help"])
        assert result.exit_code == 0, (args, result.output)
    assert (tmp_path / "stack.yaml").is_file()
    assert (tmp_path / "cluster" / "launch.sh").is_file()
    makefile = (ROOT / "Makefile").read_text()
    assert "builder ship stack.yaml" in makefile
    assert "sh cluster/launch.sh NODE" in makefile
    assert os.access(tmp_path / "cluster" / "launch.sh", os.X_OK)

"""The public Python API (``import builder``): every name resolves, lazily, type
checkers see the same names as the run time, and the example of
docs/reference/python-api.md runs as written.

    python tests/unit/test_api.py

rewrites builder/__init__.pyi from builder._EXPORTS (the one list of public names)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import builder
from builder.errors import SpecError

API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "python-api.md"
API_DOC = API_PAGE.read_text()
STUB = Path(builder.__file__).with_suffix(".pyi")
REGENERATE = "python tests/unit/test_api.py"


def _kind(name: str) -> tuple[int, str]:
    """ruff's order for __all__ (RUF022): CONSTANTS, Classes, the rest."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def _import_line(module: str, attr: str, name: str) -> str:
    """One re-export, wrapped as ruff format wraps a line over 100 characters."""
    line = f"from {module} import {attr} as {name}"
    return line if len(line) <= 100 else f"from {module} import (\n    {attr} as {name},\n)"


def stub_text() -> str:
    """builder/__init__.pyi, generated from builder._EXPORTS."""
    imports = sorted(
        (
            (target.partition(":")[0], target.partition(":")[2] or name, name)
            for name, target in builder._EXPORTS.items()
        ),
        key=lambda row: (row[0], _kind(row[1])),  # isort's order-by-type within a module
    )
    return "\n".join(
        [
            '"""What type checkers read for `import builder`: generated from _EXPORTS in',
            f"__init__.py, the one list of public names, by `{REGENERATE}`.",
            "Do not edit; tests/unit/test_api.py checks that the two agree.",
            '"""',
            "",
            "from builder._version import __version__ as __version__",
            *(_import_line(module, attr, name) for module, attr, name in imports),
            "",
            "__all__ = [",
            *(f'    "{name}",' for name in sorted(builder.__all__, key=_kind)),
            "]",
            "",
            "_EXPORTS: dict[str, str]",
            "",
            "def __dir__() -> list[str]: ...",
            "",
        ]
    )


def test_type_checkers_read_the_public_names_from_the_one_list() -> None:
    """The stub is _EXPORTS as type checkers read it: the same names, each imported from
    the module and under the name that __getattr__ uses."""
    assert STUB.read_text() == stub_text(), f"builder/__init__.pyi is stale: run {REGENERATE}"
    assert builder.__all__ == ["__version__", *builder._EXPORTS]
    assert len(set(builder.__all__)) == len(builder.__all__)


def test_no_constant_of_the_cli_is_public() -> None:
    """The stdin limit and the option patterns are the command line's business: it takes
    them from their modules (builder/cli/options.py)."""
    for name in ("MAX_SPEC_BYTES", "ENV_NAME", "IMAGE_REF", "decode_spec"):
        assert name not in builder.__all__
        with pytest.raises(AttributeError):
            getattr(builder, name)


@pytest.mark.parametrize("name", builder.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(builder, name) is not None


def test_importing_builder_stays_light() -> None:
    code = "import builder, sys; print(sorted(m for m in sys.modules if m.startswith('builder.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['builder._version']"


def test_a_spec_from_a_dict_is_checked_as_a_file_is() -> None:
    with pytest.raises(SpecError) as caught:
        builder.spec_from_dict({"name": "Bad Name", "image": {"accelerator": "tpu"}})
    text = str(caught.value)
    assert "name" in text
    assert "image.accelerator" in text


def test_the_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (example,) = re.findall(r"```python\n(.*?)```", API_DOC, re.S)[:1]
    monkeypatch.chdir(tmp_path)
    exec(compile(example, str(API_PAGE), "exec"), {})
    assert (tmp_path / "cluster" / "launch.sh").is_file()


def test_every_public_name_is_in_the_readme() -> None:
    missing = [
        name for name in builder.__all__ if name != "__version__" and f"`{name}" not in API_DOC
    ]
    assert not missing, f"docs/reference/python-api.md does not list {missing}"


def test_no_public_name_is_shadowed_by_a_subpackage() -> None:
    """A public name that is also a submodule's (builder.rehearse) is that module once the
    module is imported: the module attribute wins over the lazy __getattr__."""
    for module in pkgutil.walk_packages(builder.__path__, "builder."):
        if (
            module.name.startswith("builder.cli")
            or ".payload." in module.name
            or module.name.endswith("__main__")
        ):
            continue
        importlib.import_module(module.name)
    for name in builder.__all__:
        assert not inspect.ismodule(getattr(builder, name)), name


if __name__ == "__main__":
    STUB.write_text(stub_text())
    print(f"wrote {STUB}")

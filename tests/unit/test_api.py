"""The public Python API (``import builder``): every name resolves, lazily, and the
README's example runs as written."""

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

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


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
    (example,) = re.findall(r"```python\n(.*?)```", README.split("### Python API", 1)[1], re.S)[:1]
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README example", "exec"), {})
    assert (tmp_path / "cluster" / "launch.sh").is_file()


def test_every_public_name_is_in_the_readme() -> None:
    section = README.split("### Python API", 1)[1].split("\n## ", 1)[0]
    missing = [
        name for name in builder.__all__ if name != "__version__" and f"`{name}" not in section
    ]
    assert not missing, f"README's Python API does not list {missing}"


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

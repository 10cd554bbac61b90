"""Built-in stacks, shipped as YAML files a user can start from (`builder init`)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from builder.errors import UsageError
from builder.model import close_match

if TYPE_CHECKING:
    from importlib.abc import Traversable

DEFAULT_PRESET = "cuda-deepspeed"
_FOLDER = Path(__file__).parent


def preset_names() -> list[str]:
    """Names of the built-in presets, sorted."""
    return sorted(name.removesuffix(".yaml") for name in _files() if name.endswith(".yaml"))


def preset_text(name: str) -> str:
    """The YAML text of a preset, exactly as shipped."""
    names = preset_names()
    if name not in names:
        match = close_match(name, names)
        hint = f" (did you mean {match!r}?)" if match else ""
        raise UsageError(
            f"no preset named {name!r}{hint}; choose one of: {', '.join(names)} "
            "(`builder presets` describes them)",
            field="--preset",
            value=name,
        )
    try:
        return (_FOLDER / f"{name}.yaml").read_text(encoding="utf-8")
    except NotADirectoryError:
        return _resources().joinpath(f"{name}.yaml").read_text(encoding="utf-8")


def preset_summaries() -> list[tuple[str, str]]:
    """(name, one-line description) for every preset, without validating them."""
    import yaml

    rows = []
    for name in preset_names():
        data = yaml.safe_load(preset_text(name))
        rows.append((name, str(data.get("description", "")).strip()))
    return rows


def _files() -> list[str]:
    # The folder on disk, read directly: resources.files() loads importlib's readers and
    # zipfile, milliseconds of every `builder render`; a package installed as a zip has
    # no folder, and is read through its loader instead.
    try:
        return [entry.name for entry in _FOLDER.iterdir()]
    except NotADirectoryError:
        return [entry.name for entry in _resources().iterdir()]


def _resources() -> Traversable:
    return resources.files(__name__)

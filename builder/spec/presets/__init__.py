"""Built-in stacks, shipped as YAML files a user can start from (`builder init`)."""

from __future__ import annotations

from importlib import resources

from builder.errors import UsageError

DEFAULT_PRESET = "cuda-deepspeed"


def preset_names() -> list[str]:
    """Names of the built-in presets, sorted."""
    files = resources.files(__name__).iterdir()
    return sorted(f.name.removesuffix(".yaml") for f in files if f.name.endswith(".yaml"))


def preset_text(name: str) -> str:
    """The YAML text of a preset, exactly as shipped."""
    if name not in preset_names():
        raise UsageError(
            f"no preset named {name!r}; choose one of: {', '.join(preset_names())} "
            "(`builder presets` describes them)"
        )
    return resources.files(__name__).joinpath(f"{name}.yaml").read_text(encoding="utf-8")


def preset_summaries() -> list[tuple[str, str]]:
    """(name, one-line description) for every preset, without validating them."""
    import yaml

    rows = []
    for name in preset_names():
        data = yaml.safe_load(preset_text(name))
        rows.append((name, str(data.get("description", "")).strip()))
    return rows

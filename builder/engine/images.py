"""Reading an image back: which spec made it, with what, and how big it is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from builder.contract import LABEL_PREFIX
from builder.engine.docker import connect

if TYPE_CHECKING:
    from builder.engine.base import Engine, ImageInfo


def inspect_image(reference: str, engine: Engine | None = None) -> dict[str, Any]:
    """What `builder inspect` reports: identity, builder labels, size and layers."""
    info = (engine or connect()).image(reference)
    return image_report(info)


def image_report(info: ImageInfo) -> dict[str, Any]:
    """The report of an inspected image, as plain data (printed or as --json)."""
    ours = {
        key.removeprefix(f"{LABEL_PREFIX}."): value
        for key, value in info.labels.items()
        if key.startswith(f"{LABEL_PREFIX}.")
    }
    return {
        "id": info.id,
        "tags": list(info.tags),
        "created": info.created,
        "platform": f"linux/{info.architecture}" if info.architecture else None,
        "size_bytes": info.size,
        "size": _size(info.size),
        "layers": len(info.layers),
        "built_by_builder": bool(ours),
        "builder": dict(sorted(ours.items())),
        "labels": dict(sorted(info.labels.items())),
        "entrypoint": list(info.entrypoint),
        "cmd": list(info.cmd),
    }


def report_text(report: dict[str, Any]) -> str:
    """The human form of an image report."""
    rows = [
        ("image", report["id"]),
        ("tags", ", ".join(report["tags"]) or "(none)"),
        ("created", report["created"]),
        ("platform", report.get("platform") or "-"),
        ("size", f"{report['size']} in {report['layers']} layers"),
    ]
    if report["built_by_builder"]:
        rows += list(report["builder"].items())
    else:
        rows.append(("builder", f"no {LABEL_PREFIX}.* labels: not built by builder"))
    others = {k: v for k, v in report["labels"].items() if not k.startswith(LABEL_PREFIX)}
    rows += [("label", f"{key}={value}") for key, value in others.items()]
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key:<{width}}  {value}" for key, value in rows)


def _size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"

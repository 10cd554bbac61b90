"""The digest an image was pushed with, recorded beside its spec (stack.yaml ->
stack.digest), and the reference every plan names the image by: pinned by that
digest (``name@sha256:...``) once it is known, since a tag on a node can point
at anything.

The record is the push's own answer, written by `builder push`; it applies
while the spec's image name and tag are the ones pushed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from builder import architectures
from builder.errors import UsageError, shown
from builder.files import KIB, check_input, read_input
from builder.image.reference import problem as reference_problem
from builder.image.registry import DIGEST, Pushed
from builder.output import OutputFile, write_files

if TYPE_CHECKING:
    from pathlib import Path

    from builder.spec.records import Spec

SCHEMA = 1
MAX_PIN_BYTES = 64 * KIB
"""A record is about 200 bytes."""
_FIX = "remove it: `builder push` writes it again"


def pin_path(spec_path: Path) -> Path:
    """Where the digest of spec_path's image is recorded."""
    return spec_path.with_suffix(".digest")


def check_pin_path(spec_path: Path) -> None:
    """Where the record will go is free for a file (nothing, or a file it replaces):
    checked before the push, so that a folder or a loop there stops it."""
    check_input(pin_path(spec_path), what="the push record", fix=_FIX)


def write_pin(spec_path: Path, pushed: Pushed) -> Path:
    """Record a push beside its spec (replacing an earlier one)."""
    path = pin_path(spec_path)
    data: dict[str, object] = {
        "schema": SCHEMA,
        "reference": pushed.reference,
        "digest": pushed.digest,
    }
    if pushed.platforms:
        data["platforms"] = dict(sorted(pushed.platforms.items()))
    text = json.dumps(data, indent=2) + "\n"
    write_files([OutputFile(path.name, 0o644, text)], path.parent, force=True)
    return path


def read_pin(spec_path: Path) -> Pushed | None:
    """The recorded push beside spec_path, or None; a file that is not one is an error
    naming it."""
    path = pin_path(spec_path)
    raw = read_input(path, what="the push record", limit=MAX_PIN_BYTES, fix=_FIX)
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # ValueError: not JSON, or a number of more digits than int() takes
        said = "nested too deep" if isinstance(exc, RecursionError) else str(exc)
        raise UsageError(
            f"{path}: not the record `builder push` writes ({shown(said, quote=False)}); {_FIX}",
            path=path,
        ) from None
    reference = data.get("reference") if isinstance(data, dict) else None
    digest = data.get("digest") if isinstance(data, dict) else None
    platforms = data.get("platforms", {}) if isinstance(data, dict) else None
    if (
        not isinstance(platforms, dict)
        or not all(
            p in architectures.KNOWN and isinstance(d, str) and DIGEST.fullmatch(d)
            for p, d in platforms.items()
        )
        or not isinstance(reference, str)
        or reference_problem(reference) is not None
        or "@" in reference
        or not isinstance(digest, str)
        or not DIGEST.fullmatch(digest)
        or data.get("schema") != SCHEMA
    ):
        raise UsageError(
            f"{path}: not the record `builder push` writes (schema {SCHEMA}, reference "
            f"{shown(reference)}, digest {shown(digest)}); {_FIX}",
            path=path,
        )
    return Pushed(reference, digest, dict(platforms))


def of_spec(spec: Spec, image: str) -> bool:
    """image is the spec's own: its name:tag, or that name pinned by a digest (what
    `builder build SPEC` makes and `builder push SPEC` pushes); else another one, given
    with --image."""
    return image == f"{spec.image.name}:{spec.image.tag}" or image.startswith(f"{spec.image.name}@")


def image_for(spec: Spec, spec_path: Path | None, image: str | None) -> str:
    """The image a plan names: --image as given; else the spec's name:tag, pinned by the
    digest its last push recorded when that push was of this name:tag."""
    if image is not None:
        return image
    reference = f"{spec.image.name}:{spec.image.tag}"
    pushed = read_pin(spec_path) if spec_path is not None else None
    if pushed is not None and pushed.reference == reference:
        return pushed.pinned
    return reference

"""The digest an image was pushed with, recorded beside its spec (stack.yaml ->
stack.digest), and the reference every plan names the image by: pinned by that
digest (``name@sha256:...``) once it is known, since a tag on a node can point
at anything.

The record is the push's own answer, written by `builder push`; it applies
while the spec's image name and tag are the ones pushed.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from builder.errors import UsageError, shown
from builder.image.registry import DIGEST, Pushed
from builder.output import OutputFile, write_files
from builder.spec.records import IMAGE_REF

if TYPE_CHECKING:
    from pathlib import Path

    from builder.spec.records import Spec

SCHEMA = 1


def pin_path(spec_path: Path) -> Path:
    """Where the digest of spec_path's image is recorded."""
    return spec_path.with_suffix(".digest")


def write_pin(spec_path: Path, pushed: Pushed) -> Path:
    """Record a push beside its spec (replacing an earlier one)."""
    path = pin_path(spec_path)
    data = {"schema": SCHEMA, "reference": pushed.reference, "digest": pushed.digest}
    text = json.dumps(data, indent=2) + "\n"
    write_files([OutputFile(path.name, 0o644, text)], path.parent, force=True)
    return path


def read_pin(spec_path: Path) -> Pushed | None:
    """The recorded push beside spec_path, or None; a file that is not one is an error
    naming it."""
    path = pin_path(spec_path)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(
            f"{path}: not the record `builder push` writes ({exc}); push again or remove it"
        ) from None
    reference = data.get("reference") if isinstance(data, dict) else None
    digest = data.get("digest") if isinstance(data, dict) else None
    if (
        not isinstance(reference, str)
        or not re.fullmatch(IMAGE_REF, reference)
        or "@" in reference
        or not isinstance(digest, str)
        or not DIGEST.match(digest)
        or data.get("schema") != SCHEMA
    ):
        raise UsageError(
            f"{path}: not the record `builder push` writes (schema {SCHEMA}, reference "
            f"{shown(reference)}, digest {shown(digest)}); push again or remove it"
        )
    return Pushed(reference, digest)


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

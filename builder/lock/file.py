"""The lock file: the exact environment a stack's image was built with, to build it again.

`builder lock stack.yaml` reads a built image of the stack and writes
``stack.lock`` beside the spec: the base image (its id in the engine, and its
registry digest where the engine knows one), every Python package installed
(torch's dependencies and every transitive one included) and every Debian
package the image added or changed over its base. It is plain YAML with
sorted keys, one package per line, so it reviews well in a diff.

`builder build stack.yaml` then uses it: FROM the base's digest (or the base
must still have the locked id), apt installs exactly the locked versions,
pip is constrained to the locked versions, and a last step in the python
stage fails the build if the installed set differs from the lock in any way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from builder.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

VERSION = 1
HEADER = """\
# builder lock: the exact environment of a built image of this stack.
# `builder build` installs exactly this set (--no-lock ignores it);
# `builder lock` writes it again from a new build. Generated: do not edit.
"""
_NAME = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")
_VERSION = re.compile(r"^\S+$")


@dataclass(frozen=True)
class Base:
    reference: str
    id: str
    digest: str | None = None
    """name@sha256:... where the engine knows the image from a registry."""


@dataclass(frozen=True)
class Lock:
    stack: str
    spec_hash: str
    image: str
    base: Base
    python: dict[str, str] = field(default_factory=dict)
    apt: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        import yaml

        data = {
            "version": VERSION,
            "stack": self.stack,
            "spec-hash": self.spec_hash,
            "image": self.image,
            "base": {
                "reference": self.base.reference,
                "id": self.base.id,
                "digest": self.base.digest,
            },
            "python": dict(sorted(self.python.items())),
            "apt": dict(sorted(self.apt.items())),
        }
        return HEADER + yaml.safe_dump(
            data, sort_keys=False, default_flow_style=False, width=1000, allow_unicode=True
        )

    def constraints(self) -> str:
        """pip's constraints file: every locked Python package at its version."""
        return "".join(f"{name}=={version}\n" for name, version in sorted(self.python.items()))


def lock_path(spec_path: Path) -> Path:
    """stack.yaml -> stack.lock, beside it."""
    return spec_path.with_suffix(".lock")


def read_lock(path: Path) -> Lock:
    """Parse and check a lock file; every problem is a UsageError naming the file."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(
            f"{path} is not valid YAML ({exc}); write it again: builder lock"
        ) from None
    try:
        return _parse(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(
            f"{path} is not a builder lock ({exc}); write it again with `builder lock`"
        ) from None


def _parse(data: Any) -> Lock:
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise ValueError(f"version must be {VERSION}")
    base = data["base"]
    python = {str(k): str(v) for k, v in (data.get("python") or {}).items()}
    apt = {str(k): str(v) for k, v in (data.get("apt") or {}).items()}
    for name, version in [*python.items(), *apt.items()]:
        if not _NAME.match(name) or not _VERSION.match(version):
            raise ValueError(f"bad package entry {name}: {version}")
    return Lock(
        stack=str(data["stack"]),
        spec_hash=str(data["spec-hash"]),
        image=str(data["image"]),
        base=Base(str(base["reference"]), str(base["id"]), base.get("digest")),
        python=python,
        apt=apt,
    )

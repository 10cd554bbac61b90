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

from builder.errors import UsageError, shown
from builder.files import MIB, named, read_input
from builder.image.reference import parse
from builder.image.reference import problem as reference_problem
from builder.image.registry import DIGEST

if TYPE_CHECKING:
    from pathlib import Path

VERSION = 1
HEADER = """\
# builder lock: the exact environment of a built image of this stack.
# `builder build` installs exactly this set (--no-lock ignores it);
# `builder lock` writes it again from a new build. Generated: do not edit.
"""
# Every value of a lock reaches a Dockerfile or a .def (FROM, apt-get install name=version,
# pip's constraints): each is checked whole against what its tool accepts, at load.
# Image references are read with docker's own grammar (builder.image.reference).
_REFERENCES = ("image", "base.reference", "base.digest")
_FIELDS: dict[str, re.Pattern[str]] = {
    "stack": re.compile(r"[a-z0-9][a-z0-9._-]{0,127}"),
    "spec-hash": re.compile("[0-9a-f]{1,64}"),
    "base.id": re.compile("sha256:[0-9a-f]{1,64}"),
}
# Debian policy 5.6.1 (names) and 5.6.12 (versions: [epoch:]upstream[-revision])
_APT_NAME = re.compile(r"[a-z0-9][a-z0-9.+-]{1,127}")
_APT_VERSION = re.compile(r"(?:[0-9]{1,9}:)?[A-Za-z0-9][A-Za-z0-9.+~-]{0,127}")
# PEP 508 names; PEP 440 versions as packaging reads them (public and local parts)
_PIP_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,126}[A-Za-z0-9])?")
_PIP_VERSION = re.compile(
    r"v?(?:[0-9]{1,9}!)?[0-9]{1,20}(?:\.[0-9]{1,20}){0,15}"
    r"(?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]{0,20})?"
    r"(?:-[0-9]{1,20}|[-_.]?(?:post|rev|r)[-_.]?[0-9]{0,20})?"
    r"(?:[-_.]?dev[-_.]?[0-9]{0,20})?"
    r"(?:\+[a-z0-9]{1,32}(?:[-_.][a-z0-9]{1,32}){0,15})?",
    re.IGNORECASE,
)
_MAX_DEPTH = 8
MAX_LOCK_BYTES = 16 * MIB
"""A lock of 5,000 packages is about 200 KiB."""
_FIX = "write it again with `builder lock`"
_FIX_BESIDE = "remove it (--no-lock ignores it) or write it again with `builder lock`"


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
    raw = read_input(path, what="the lock", limit=MAX_LOCK_BYTES, fix=_FIX)
    if raw is None:
        raise UsageError(f"the lock {named(path)} does not exist; {_FIX}", path=path)
    return parse_lock(raw, path)


def read_lock_beside(spec_path: Path) -> Lock | None:
    """The lock beside a spec file (stack.lock), None when there is none; anything else
    there (a folder, a loop, a FIFO, an oversized or broken file) is an error naming it."""
    path = lock_path(spec_path)
    raw = read_input(path, what="the lock", limit=MAX_LOCK_BYTES, fix=_FIX_BESIDE)
    return None if raw is None else parse_lock(raw, path)


def parse_lock(raw: bytes, path: Path) -> Lock:
    """The lock raw holds (the bytes of path); every problem is a UsageError naming path."""
    import yaml

    try:
        data = _safe_yaml(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise UsageError(
            f"{path} (line {line}) is not UTF-8 text; write it again with `builder lock`",
            path=path,
        ) from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        said = "nested deeper than a lock is" if isinstance(exc, RecursionError) else exc
        raise UsageError(
            f"{path} is not valid YAML ({shown(said, quote=False, limit=300)}); "
            "write it again: builder lock",
            path=path,
        ) from None
    try:
        return _parse(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(
            f"{path} is not a builder lock ({shown(exc, quote=False, limit=300)}); write it "
            "again with `builder lock`",
            path=path,
        ) from None


def _safe_yaml(text: str) -> Any:
    """YAML data without aliases (an alias bomb is a few hundred bytes) or deep nesting."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        todo, seen = ([(node, 0)] if node is not None else []), set()
        while todo:
            current, depth = todo.pop()
            if id(current) in seen or depth > _MAX_DEPTH:
                raise ValueError(
                    f"line {current.start_mark.line + 1}: "
                    + (
                        "a YAML alias, which a lock never has"
                        if id(current) in seen
                        else "nested deeper than a lock is"
                    )
                )
            seen.add(id(current))
            if isinstance(current, yaml.MappingNode):
                todo += [(child, depth + 1) for pair in current.value for child in pair]
            elif isinstance(current, yaml.SequenceNode):
                todo += [(child, depth + 1) for child in current.value]
        return loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()


def _parse(data: Any) -> Lock:
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise ValueError(f"version must be {VERSION}")
    base = data["base"]
    if not isinstance(base, dict):
        raise TypeError("base must be a mapping of reference, id and digest")
    values = {
        "stack": data["stack"],
        "spec-hash": data["spec-hash"],
        "image": data["image"],
        "base.reference": base["reference"],
        "base.id": base["id"],
        "base.digest": base.get("digest") or "",
    }
    for key, value in values.items():
        if key == "base.digest" and not value:
            continue
        if not isinstance(value, str):
            raise ValueError(f"{key}: {shown(value)} is not a valid value")
        if key in _REFERENCES:
            wrong = _reference_problem(key, value)
            if wrong is not None:
                raise ValueError(f"{key}: {shown(value)} {wrong}")
        elif not _FIELDS[key].fullmatch(value):
            raise ValueError(f"{key}: {shown(value)} is not a valid value")
    return Lock(
        stack=values["stack"],
        spec_hash=values["spec-hash"],
        image=values["image"],
        base=Base(values["base.reference"], values["base.id"], values["base.digest"] or None),
        python=_packages(data.get("python"), "python", _PIP_NAME, _PIP_VERSION),
        apt=_packages(data.get("apt"), "apt", _APT_NAME, _APT_VERSION),
    )


def _reference_problem(key: str, value: str) -> str | None:
    """Why value cannot be the lock's image reference at key (docker's grammar; the base's
    digest is name@sha256:..., what the engine records of a pulled image); None if it can."""
    wrong = reference_problem(value)
    if wrong is not None:
        return f"is not an image reference docker accepts: {wrong}"
    if key == "base.digest":
        pinned = parse(value)
        if pinned.tag is not None or pinned.digest is None or not DIGEST.fullmatch(pinned.digest):
            return "is not name@sha256:<64 hex digits>"
    return None


def _packages(
    data: Any, section: str, name: re.Pattern[str], version: re.Pattern[str]
) -> dict[str, str]:
    """A section of name: version pairs, each checked against what its installer accepts."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TypeError(f"{section} must be a mapping of package: version")
    found: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not name.fullmatch(key):
            raise ValueError(f"{section}: {shown(key)} is not a package name")
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise TypeError(f"{section}.{key}: {shown(value)} is not a version")
        text = str(value)
        if not version.fullmatch(text):
            raise ValueError(f"{section}.{key}: {shown(text)} is not a valid version")
        found[key] = text
    return found

"""YAML (file or preset) -> validated ``Stack``, with field paths and line numbers.

All problems found are reported together: YAML syntax, duplicate keys,
unknown keys, wrong types and the rules of ``check`` (platforms and
launchers included). Each carries the dotted field path and the YAML line it
came from. The YAML is parsed once: the node tree gives the lines, and the
data is constructed from it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.errors import Problem, SpecError, UsageError, shown
from builder.files import file_status, named, read_bytes, read_input
from builder.model import Invalid, Written, parse
from builder.spec.check import CREDENTIALS_ADVICE, check_spec, has_credentials
from builder.spec.presets import preset_text
from builder.spec.records import Spec

if TYPE_CHECKING:
    import yaml

Path_ = tuple[str | int, ...]

MAX_DEPTH = 32
"""Deeper than any spec (about 5 levels) and far from Python's recursion limit."""
MAX_SPEC_BYTES = 4 * 1024 * 1024
MAX_REQUIREMENTS_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Stack:
    """A validated spec plus where it came from (for relative paths and labels)."""

    spec: Spec
    source: str
    root: Path | None
    preset: str | None = None


def load_spec(path: Path) -> Stack:
    """Load and validate a stack.yaml file."""
    fix = "name the stack.yaml to use (a stack spec is a few dozen lines), or --preset NAME"
    raw = read_input(path, what="spec file", limit=MAX_SPEC_BYTES, fix=fix)
    if raw is None:
        raise UsageError(
            f"spec file {named(path)} does not exist; create one with "
            "`builder init --preset NAME -o stack.yaml` or pass --preset NAME",
            path=path,
        )
    root = path.resolve().parent
    return Stack(parse_spec(decoded(raw, str(path)), str(path), root), str(path), root)


def decoded(raw: bytes, source: str) -> str:
    """raw as UTF-8 text, or a SpecError naming the line of the first bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError(
            source,
            [
                Problem(
                    "(file)",
                    f"byte 0x{raw[exc.start]:02x} in column {column} is not UTF-8; "
                    "save the file as UTF-8 text",
                    line,
                )
            ],
        ) from None


def load_preset(name: str) -> Stack:
    """Load a built-in preset by name."""
    return Stack(parse_spec(preset_text(name), f"preset {name}"), f"preset:{name}", None, name)


def load_stack(spec_path: Path | None, preset: str | None) -> Stack:
    """The CLI's one entry: exactly one of a spec file or a preset."""
    if (spec_path is None) == (preset is None):
        raise UsageError("give either a spec file (stack.yaml) or --preset NAME, not both or none")
    if preset is not None:
        return load_preset(preset)
    assert spec_path is not None
    return load_spec(spec_path)


def parse_spec(text: str, source: str, root: Path | None = None) -> Spec:
    """Parse YAML text into a Spec, raising one SpecError listing every problem; with the
    spec's folder (root), the files it names are checked too."""
    data, lines = _load_yaml(text, source)
    return _validated(data, lines, source, root)


def spec_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> Stack:
    """The stack of the data a stack.yaml holds (the Python API's way in, as load_spec
    is for a file), checked as a file is: one SpecError listing every problem."""
    if not isinstance(data, Mapping):
        problem = Problem("(top level)", f"expected a mapping, got {type(data).__name__}")
        raise SpecError(source, [problem])
    return Stack(_validated(dict(data), {}, source, None), source, None)


def _validated(data: Any, lines: dict[Path_, int], source: str, root: Path | None) -> Spec:
    try:
        spec = parse(Spec, data)
    except Invalid as exc:
        raise SpecError(
            source,
            [
                Problem(_join(loc), msg, _line_for(lines, loc), value=_value_at(data, loc))
                for loc, msg in exc.problems
            ],
        ) from None
    found = check_spec(spec)
    if root is not None and spec.image.requirements is not None:
        try:
            # A missing file is the renderer's to report: a hostfile needs none.
            if file_status(requirements_path(root, spec.image.requirements)) is not None:
                read_requirements(root, spec.image.requirements)
        except ValueError as exc:
            found.append(("image.requirements", str(exc)))
    problems = [
        Problem(path, message, _line_for(lines, loc), value=_value_at(data, loc))
        for path, message in found
        for loc in [_split(path)]
    ]
    if problems:
        raise SpecError(source, problems)
    return spec


def requirements_path(root: Path, relative: str) -> Path:
    """The requirements file named relative to the spec's folder (root), symlinks resolved,
    or a ValueError: its bytes go into the output and the build context, so it must be
    inside that folder and, where it exists, a regular file."""
    if Path(relative).is_absolute():
        raise ValueError(
            f"{shown(relative)} is an absolute path; give a path relative to the spec's folder"
        )
    if os.path.lexists(root / relative) and not (root / relative).exists():
        raise ValueError(f"{shown(relative)} is a symlink to nothing; name the file itself")
    try:
        folder = root.resolve()
        path = (folder / relative).resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        raise ValueError(
            f"{shown(relative)} leads into a symlink loop (a link that leads back to "
            "itself); name the requirements file itself"
        ) from None
    if not path.is_relative_to(folder):
        raise ValueError(
            f"{shown(relative)} is outside the spec's folder {folder} (after resolving "
            "symlinks); copy the file next to the spec"
        )
    file_status(path, limit=MAX_REQUIREMENTS_BYTES)  # a folder, FIFO, device or loop
    return path


def read_requirements(root: Path, relative: str) -> str:
    """The text of the requirements file (see requirements_path), or a ValueError naming
    what is wrong: missing, unreadable, too large, not UTF-8 (with the line)."""
    path = requirements_path(root, relative)
    raw = read_bytes(path, limit=MAX_REQUIREMENTS_BYTES)
    if raw is None:
        raise ValueError(
            f"cannot read {path}: no such file; the path is relative to the spec file's folder"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ValueError(f"{path} line {line} is not UTF-8 text; save it as UTF-8") from None
    if has_credentials(text):
        raise ValueError(f"{path}: {CREDENTIALS_ADVICE}")
    return text


def _load_yaml(text: str, source: str) -> tuple[Any, dict[Path_, int]]:
    import yaml

    # libyaml's safe loader when PyYAML has it (several times faster), else pure Python
    loader = _loader_class()(text)
    lines: dict[Path_, int] = {}
    try:
        node = loader.get_single_node()
        if node is not None:
            # Before construction: an alias bomb is a small node graph that only
            # construction (and any walk of the data) blows up exponentially.
            _walk(node, lines, source)
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise SpecError(
            source, [Problem("(yaml)", f"not valid YAML: {exc.problem or exc}", line)]
        ) from None
    except yaml.YAMLError as exc:
        raise SpecError(source, [Problem("(yaml)", f"not valid YAML: {exc}")]) from None
    except RecursionError:  # the pure-Python loader, where libyaml is missing
        problem = Problem("(yaml)", f"nested deeper than {MAX_DEPTH} levels; a spec is a few")
        raise SpecError(source, [problem]) from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise SpecError(
            source,
            [
                Problem(
                    "(top level)", "the spec must be a mapping with name:, image: and launch:", 1
                )
            ],
        )
    return data, lines


@cache
def _loader_class() -> type[Any]:
    """The safe loader whose floats keep their text (``Written``: 3.10 is not 3.1 to
    the person who wrote it)."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc,valid-type]
        pass

    def written(loader: Any, node: yaml.ScalarNode) -> Written:
        return Written(loader.construct_yaml_float(node), str(node.value))

    Loader.add_constructor("tag:yaml.org,2002:float", written)
    return Loader


def _walk(root: yaml.Node, lines: dict[Path_, int], source: str) -> None:
    """Record the line of every path; refuse aliases, merge keys, duplicate keys and
    nesting deeper than a spec can be. Iterative: 10,000 levels are no RecursionError."""
    import yaml

    problems: list[Problem] = []
    seen_nodes: set[int] = set()
    todo: list[tuple[yaml.Node, Path_, int]] = [(root, (), root.start_mark.line + 1)]
    while todo:
        node, path, line = todo.pop()
        lines.setdefault(path, line)
        if id(node) in seen_nodes:
            problems.append(
                Problem(
                    _join(path),
                    "YAML aliases (*name) are not accepted in a spec; "
                    "write the value out where it is used",
                    line,
                )
            )
            break
        seen_nodes.add(id(node))
        if len(path) > MAX_DEPTH:
            problems.append(
                Problem(
                    _join(path[:MAX_DEPTH]),
                    f"nested deeper than {MAX_DEPTH} levels; a spec is a few levels deep",
                    line,
                )
            )
            break
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            children = []
            for key_node, value_node in node.value:
                key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
                key_line = key_node.start_mark.line + 1
                if key_node.tag == "tag:yaml.org,2002:merge":
                    problems.append(
                        Problem(
                            _join(path),
                            "YAML merge keys (<<) are not accepted in a spec; write the keys out",
                            key_line,
                        )
                    )
                elif key in keys:
                    problems.append(
                        Problem(
                            _join((*path, key)),
                            "key given twice; YAML would silently keep only the last one",
                            key_line,
                        )
                    )
                keys.add(key)
                children.append((value_node, (*path, key), key_line))
            todo.extend(reversed(children))
        elif isinstance(node, yaml.SequenceNode):
            todo.extend(
                (item, (*path, index), item.start_mark.line + 1)
                for index, item in reversed(list(enumerate(node.value)))
            )
    if problems:
        raise SpecError(source, problems)


def _join(loc: Path_) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _split(dotted: str) -> Path_:
    parts: list[str | int] = []
    for chunk in dotted.replace("]", "").split("."):
        name, *indexes = chunk.split("[")
        parts.append(name)
        parts.extend(int(i) for i in indexes)
    return tuple(parts)


def _value_at(data: Any, loc: Path_) -> object:
    """What the spec's data holds at loc, or None where loc names nothing there (a missing
    key) or the whole spec."""
    if not loc:
        return None
    for part in loc:
        listed = isinstance(part, int) and isinstance(data, list) and 0 <= part < len(data)
        if not (listed or (isinstance(part, str) and isinstance(data, Mapping) and part in data)):
            return None
        data = data[part]
    return data


def _line_for(lines: dict[Path_, int], loc: Path_) -> int | None:
    """The line of loc, or of its nearest ancestor that the YAML has."""
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None

"""YAML (file or preset) -> validated ``Stack``, with field paths and line numbers.

All problems found are reported together: YAML syntax, duplicate keys,
unknown keys, wrong types and the rules of ``check`` (platforms and
launchers included). Each carries the dotted field path and the YAML line it
came from. The YAML is parsed once: the node tree gives the lines, and the
data is constructed from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from builder.errors import Problem, SpecError, UsageError
from builder.model import Invalid, parse
from builder.spec.check import check_spec
from builder.spec.presets import preset_text
from builder.spec.records import Spec

if TYPE_CHECKING:
    from pathlib import Path

    import yaml

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Stack:
    """A validated spec plus where it came from (for relative paths and labels)."""

    spec: Spec
    source: str
    root: Path | None
    preset: str | None = None


def load_spec(path: Path) -> Stack:
    """Load and validate a stack.yaml file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(
            f"spec file {path} does not exist; create one with "
            "`builder init --preset NAME -o stack.yaml` or pass --preset NAME"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read spec file {path}: {exc}") from None
    return Stack(parse_spec(text, str(path)), str(path), path.resolve().parent)


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


def parse_spec(text: str, source: str) -> Spec:
    """Parse YAML text into a Spec, raising one SpecError listing every problem."""
    data, lines = _load_yaml(text, source)
    try:
        spec = parse(Spec, data)
    except Invalid as exc:
        raise SpecError(
            source, [Problem(_join(loc), msg, _line_for(lines, loc)) for loc, msg in exc.problems]
        ) from None
    problems = [
        Problem(path, message, _line_for(lines, _split(path))) for path, message in check_spec(spec)
    ]
    if problems:
        raise SpecError(source, problems)
    return spec


def _load_yaml(text: str, source: str) -> tuple[Any, dict[Path_, int]]:
    import yaml

    # libyaml's safe loader when PyYAML has it (several times faster), else pure Python
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise SpecError(
            source, [Problem("(yaml)", f"not valid YAML: {exc.problem or exc}", line)]
        ) from None
    except yaml.YAMLError as exc:
        raise SpecError(source, [Problem("(yaml)", f"not valid YAML: {exc}")]) from None
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
    lines: dict[Path_, int] = {}
    duplicates: list[Problem] = []
    if node is not None:
        _walk(node, (), lines, duplicates)
    if duplicates:
        raise SpecError(source, duplicates)
    return data, lines


def _walk(node: yaml.Node, path: Path_, lines: dict[Path_, int], dups: list[Problem]) -> None:
    import yaml

    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                dups.append(
                    Problem(
                        _join((*path, key)),
                        "key given twice; YAML would silently keep only the last one",
                        key_node.start_mark.line + 1,
                    )
                )
            seen.add(key)
            key_path = (*path, key)
            _walk(value_node, key_path, lines, dups)
            lines[key_path] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), lines, dups)


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


def _line_for(lines: dict[Path_, int], loc: Path_) -> int | None:
    """The line of loc, or of its nearest ancestor that the YAML has."""
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None

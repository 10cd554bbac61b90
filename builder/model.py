"""Closed, frozen, typed records built from plain YAML data, and their JSON Schema.

The spec needs a handful of things: unknown keys are errors, types are
strict (YAML's 3.10 is a float, not a version), constraints on strings and
numbers, every problem reported at once with its path, and a JSON Schema for
editors. This module gives exactly that on top of frozen dataclasses, in a
few milliseconds: pydantic did the same for ~150 ms of import and model
building on every command (bench/cli_latency.py).

A record is a frozen dataclass whose fields are declared with ``field()``;
``parse(Record, data)`` returns an instance or raises ``Invalid`` listing
``(path, message)`` pairs. Two things may come from plug-ins (the platform
and launcher modules) rather than the record: the ``choices`` of a field, and
``extras``, keys of the record a plug-in owns (``image.cuda``), collected into
one mapping field and written back flat by ``dump``.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union, get_args, get_origin

from builder.errors import SHOWN, shown

if TYPE_CHECKING:
    from collections.abc import Iterable

T = TypeVar("T")
MAX_TEXT = 4096
"""The longest string a record takes: longer is a mistake (or an attack), never a value."""
Loc = tuple[str | int, ...]
Check = typing.Callable[[Any], Any]


class Invalid(Exception):
    """Every problem found in the data, as (path, message) pairs."""

    def __init__(self, problems: list[tuple[Loc, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{'.'.join(map(str, loc))}: {msg}" for loc, msg in problems))


@dataclasses.dataclass(frozen=True)
class Extra:
    """A string key of a record that a plug-in owns (a platform's ``cuda``)."""

    name: str
    description: str
    pattern: str | None = None
    default: str | None = None


@dataclasses.dataclass(frozen=True)
class Rule:
    """Constraints and documentation of one field."""

    description: str = ""
    pattern: str | None = None
    ge: int | None = None
    le: int | None = None
    min_length: int | None = None
    items_pattern: str | None = None
    keys_pattern: str | None = None
    check: Check | None = None
    choices: typing.Callable[[], tuple[str, ...]] | None = None
    """The values a string may take, asked for when data is parsed (plug-in names)."""
    extras: typing.Callable[[], tuple[Extra, ...]] | None = None
    """On a dict[str, str] field: the record's own keys that are collected into it."""
    sections: typing.Callable[[], dict[str, type[Any]]] | None = None
    """On a dict[str, Any] field: the record's own keys that plug-ins own as whole
    records (``launch.slurm``), each parsed by its record class, absent ones its default."""
    example: str | None = None
    """A valid value as YAML writes it (``[gpu01, gpu02]``), for messages about this field."""
    what: str | None = None
    """What the field holds, for messages (``a list of host names``); default: its type."""

    @property
    def collects(self) -> bool:
        """The field holds keys of its record's own (extras, sections), written back flat."""
        return self.extras is not None or self.sections is not None


def field(
    default: Any = dataclasses.MISSING,
    *,
    default_factory: Any = dataclasses.MISSING,
    description: str = "",
    pattern: str | None = None,
    ge: int | None = None,
    le: int | None = None,
    min_length: int | None = None,
    items_pattern: str | None = None,
    keys_pattern: str | None = None,
    check: Check | None = None,
    choices: typing.Callable[[], tuple[str, ...]] | None = None,
    extras: typing.Callable[[], tuple[Extra, ...]] | None = None,
    sections: typing.Callable[[], dict[str, type[Any]]] | None = None,
    example: str | None = None,
    what: str | None = None,
) -> Any:
    """A record field with its constraints; ``check`` may normalise or raise ValueError.
    ``example`` (YAML) and ``what`` only improve the messages about a wrong value; a
    scalar or non-empty default is the example where none is given."""
    if example is None and default not in (dataclasses.MISSING, None, (), ""):
        example = yaml_flow(default)
    rule = Rule(
        description,
        pattern,
        ge,
        le,
        min_length,
        items_pattern,
        keys_pattern,
        check,
        choices,
        extras,
        sections,
        example,
        what,
    )
    return dataclasses.field(
        default=default, default_factory=default_factory, metadata={"rule": rule}
    )


def parse(cls: type[T], data: Any) -> T:
    """Build a record from plain data, or raise Invalid with every problem."""
    problems: list[tuple[Loc, str]] = []
    value = _record(cls, data, (), problems)
    if problems:
        raise Invalid(problems)
    return typing.cast("T", value)


def dump(record: Any) -> Any:
    """Plain JSON-able data of a record (enums as values, tuples as lists); the keys
    plug-ins own are written where the YAML has them, beside the record's own."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        data: dict[str, Any] = {}
        for f in dataclasses.fields(record):
            value = dump(getattr(record, f.name))
            if _rule(f).collects:
                data.update(value)
            else:
                data[f.name] = value
        return data
    if isinstance(record, Enum):
        return record.value
    if isinstance(record, tuple | list):
        return [dump(item) for item in record]
    if isinstance(record, dict):
        return {key: dump(value) for key, value in record.items()}
    return record


def sorted_unique(items: tuple[str, ...]) -> tuple[str, ...]:
    """items sorted, refused when one is listed twice: install order does not matter to
    apt or pip, and sorting makes a hash independent of how the list was written."""
    twice = sorted({item for item in items if items.count(item) > 1})
    if twice:
        raise ValueError(f"listed twice: {', '.join(twice)}")
    return tuple(sorted(items))


def field_names(cls: type[Any]) -> list[str]:
    """The keys a record accepts, in declaration order (plug-ins' keys in place of their
    mapping field)."""
    names: list[str] = []
    for f in dataclasses.fields(cls):
        rule = _rule(f)
        if rule.extras is not None:
            names += [extra.name for extra in rule.extras()]
        elif rule.sections is not None:
            names += list(rule.sections())
        else:
            names.append(f.name)
    return names


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _rule(f: dataclasses.Field[Any]) -> Rule:
    rule = f.metadata.get("rule")
    return rule if isinstance(rule, Rule) else Rule()


def _record(cls: type[Any], data: Any, loc: Loc, problems: list[tuple[Loc, str]]) -> Any:
    if not isinstance(data, dict):
        problems.append((loc, _not_a_record(cls, data, loc)))
        return None
    fields = {f.name: f for f in dataclasses.fields(cls)}
    known = field_names(cls) if data else []
    problems.extend(
        ((*loc, shown(key, quote=False)), _unknown_key(key, known))
        for key in data
        if key not in known
    )
    values: dict[str, Any] = {}
    before = len(problems)
    for name, f in fields.items():
        rule = _rule(f)
        if rule.extras is not None:
            values[name] = _extras(rule.extras(), data, loc, problems)
        elif rule.sections is not None:
            values[name] = {
                key: _record(section, data[key], (*loc, key), problems)
                if key in data
                else section()
                for key, section in rule.sections().items()
            }
        elif name in data:
            values[name] = _value(_hints(cls)[name], _rule(f), data[name], (*loc, name), problems)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            problems.append(((*loc, name), "required key is missing"))
    if len(problems) > before:
        return None
    return cls(**values)


def _unknown_key(key: object, known: list[str]) -> str:
    match = close_match(key, known)
    if match is None:
        return f"unknown key {shown(key)}; check its spelling (see `builder schema`)"
    return f"unknown key {shown(key)}; did you mean {match!r}? (see `builder schema`)"


def _value(  # noqa: PLR0911 - one branch per kind of type
    tp: Any, rule: Rule, data: Any, loc: Loc, problems: list[tuple[Loc, str]]
) -> Any:
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        (inner,) = [arg for arg in args if arg is not type(None)]
        return _value(inner, rule, data, loc, problems)
    if origin is Literal:
        # exactly: True == 1 == 1.0 to Python, never to a user (version: true)
        if not any(type(data) is type(arg) and data == arg for arg in args):
            problems.append((loc, _not_a_choice(data, args, loc)))
        return data
    if isinstance(tp, type) and issubclass(tp, Enum):
        values = [member.value for member in tp]
        if data not in values:
            problems.append((loc, _not_a_choice(data, values, loc)))
            return None
        return tp(data)
    if dataclasses.is_dataclass(tp):
        return _record(typing.cast("type[Any]", tp), data, loc, problems)
    if origin is tuple:
        return _sequence(args[0], rule, data, loc, problems)
    if origin is dict:
        return _mapping(rule, data, loc, problems, args[1])
    return _scalar(tp, rule, data, loc, problems)


def _extras(
    extras: tuple[Extra, ...], data: dict[Any, Any], loc: Loc, problems: list[tuple[Loc, str]]
) -> dict[str, str]:
    """The plug-in keys present in data, each a string checked by its own pattern."""
    found: dict[str, str] = {}
    for extra in extras:
        if extra.name in data:
            example = None if extra.default is None else yaml_flow(extra.default)
            rule = Rule(pattern=extra.pattern, min_length=1, example=example)
            value = _scalar(str, rule, data[extra.name], (*loc, extra.name), problems)
            if isinstance(value, str):
                found[extra.name] = value
    return found


def _sequence(item: Any, rule: Rule, data: Any, loc: Loc, problems: list[tuple[Loc, str]]) -> Any:
    if not isinstance(data, list):
        problems.append((loc, _not_a_list(item, rule, data, loc)))
        return None
    before = len(problems)
    item_rule = Rule(pattern=rule.items_pattern)
    items = tuple(_value(item, item_rule, x, (*loc, i), problems) for i, x in enumerate(data))
    if rule.min_length is not None and len(items) < rule.min_length:
        problems.append((loc, f"needs at least {rule.min_length} item(s)"))
    return _checked(rule, items, loc, problems, before)


def _mapping(
    rule: Rule, data: Any, loc: Loc, problems: list[tuple[Loc, str]], values: Any = str
) -> Any:
    if not isinstance(data, dict):
        problems.append((loc, _not_a_mapping(rule, data, loc)))
        return None
    before = len(problems)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str) or (
            _text_problem(key) or (rule.keys_pattern and not re.fullmatch(rule.keys_pattern, key))
        ):
            problems.append(
                ((*loc, shown(key, quote=False)), f"{shown(key)} is not a valid name here")
            )
        elif values is not str:  # counts (launch.node_slots): read as the scalar they are
            out[key] = _scalar(values, Rule(), value, (*loc, key), problems)
        # a mapping's values are never shown: launch.env's may be secrets
        elif not isinstance(value, str):
            problems.append(
                (
                    (*loc, key),
                    f"expected a string, got {_kind(value)} (not shown: it may be a "
                    "secret); write the value in quotes: "
                    f"{_snippet((shown(key, quote=False),), _QUOTED_SECRET)} (YAML reads "
                    "an unquoted 1, 1.0, true or null as another type)",
                )
            )
        elif found := _text_problem(value, show=False):
            problems.append(((*loc, key), found))
        else:
            out[key] = value
    return _checked(rule, out, loc, problems, before)


class Written(float):
    """A float as a YAML file wrote it: its value, and its text (``3.10``, which YAML
    reads as 3.1), for a message that shows what the user typed."""

    text: str

    def __new__(cls, value: float, text: str) -> Written:
        made = super().__new__(cls, value)
        made.text = text
        return made


def _number_for_text(data: float, loc: Loc) -> str:
    """YAML reads 3.10 as the float 3.1 and 12 as an int: the usual version typo. The
    loader's numbers remember how they were written (``Written``): 3.10, not 3.1."""
    if not isinstance(data, Written):  # not from the loader: what was typed is unknown
        note = " (unquoted, 3.10 becomes 3.1)" if isinstance(data, float) else ""
        return (
            f"YAML read {data} as a number; write it in quotes: "
            + _snippet(loc, f'"{data}"', code=False)
            + note
        )
    changed = data.text != str(data)
    return (
        f"YAML read {data.text} as a number; write it in quotes: "
        + _snippet(loc, f'"{data.text}"', code=False)
        + (f" (unquoted, {data.text} became {data})" if changed else "")
    )


def _scalar(tp: Any, rule: Rule, data: Any, loc: Loc, problems: list[tuple[Loc, str]]) -> Any:
    before = len(problems)
    # bool is an int to Python, never to a user: check it first and exactly.
    if tp is bool or isinstance(data, bool):
        if not isinstance(data, bool) or tp is not bool:
            problems.append((loc, _wrong_type(tp, rule, data, loc)))
        return _checked(rule, data, loc, problems, before)
    if tp is str and isinstance(data, int | float):
        problems.append((loc, _number_for_text(data, loc)))
        return None
    data = float(data) if isinstance(data, Written) else data  # a plain float from here on
    if not isinstance(data, tp):
        problems.append((loc, _wrong_type(tp, rule, data, loc)))
        return None
    if isinstance(data, str):
        choices = rule.choices() if rule.choices is not None else None
        if found := _text_problem(data):
            problems.append((loc, found))
        elif choices is not None and data not in choices:
            problems.append((loc, _not_a_choice(data, choices, loc)))
        elif rule.min_length is not None and len(data) < rule.min_length:
            problems.append((loc, "must not be empty"))
        elif rule.pattern is not None and not re.fullmatch(rule.pattern, data):
            example = f"; e.g. {_snippet(loc, rule.example)}" if rule.example else ""
            problems.append(
                (loc, f"{shown(data)} is not a valid value here (pattern {rule.pattern}){example}")
            )
    if isinstance(data, int):
        if rule.ge is not None and data < rule.ge:
            problems.append((loc, f"{data} is too small: the minimum is {rule.ge}"))
        if rule.le is not None and data > rule.le:
            problems.append((loc, f"{data} is too large: the maximum is {rule.le}"))
    return _checked(rule, data, loc, problems, before)


def _checked(rule: Rule, value: Any, loc: Loc, problems: list[tuple[Loc, str]], before: int) -> Any:
    if rule.check is None or len(problems) > before:
        return value
    try:
        return rule.check(value)
    except ValueError as exc:
        problems.append((loc, str(exc)))
        return value


def _text_problem(text: str, *, show: bool = True) -> str | None:
    """What makes text unfit for any record field: its size, a character that is not
    printable (line breaks, Unicode's too, tabs, escapes, and the invisible format
    characters: bidi overrides such as U+202E, zero-width ones) that would make a
    spec string span lines, move the cursor or read otherwise than it runs. show:
    whether the message may quote text (never a mapping's value: a secret)."""
    if len(text) > MAX_TEXT:
        return f"{len(text)} characters long; the most a value may have is {MAX_TEXT}"
    if text.isprintable():
        return None
    found = next(c for c in text if not c.isprintable() and c != " ")
    what = f"{shown(text)} holds" if show else "the value holds"
    return (
        f"{what} the character U+{ord(found):04X} {found!r}, which is not printable (a "
        "line break, tab, escape or invisible format character); every value is one line "
        "of printable text"
    )


# Messages about a value of the wrong kind: each names what was given (shortened by
# ``shown``; never a mapping's values, which may be secrets), what the field takes and
# what to write instead, as YAML.

_QUOTED_SECRET = '"..."'
_PLAIN = r"[A-Za-z_/][A-Za-z0-9_./+-]*"
"""A string YAML reads as itself without quotes (the words below aside)."""
_YAML_WORDS = frozenset(["y", "n", "yes", "no", "on", "off", "true", "false", "null"])
"""YAML 1.1's booleans and null: a string spelt so is written in quotes."""
_TRUE_WORDS = frozenset({"y", "yes", "on", "true", "1"})
_FALSE_WORDS = frozenset({"n", "no", "off", "false", "0"})


def yaml_flow(value: Any) -> str:  # noqa: PLR0911 - one branch per kind of value
    """value as YAML writes it on one line (flow style), quoted only where YAML needs it:
    what a message shows to write."""
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(yaml_flow(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{yaml_flow(k)}: {yaml_flow(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if re.fullmatch(_PLAIN, text) and text.lower() not in _YAML_WORDS:
        return text
    return "'" + text.replace("'", "''") + "'"


def close_match(name: object, choices: Iterable[str]) -> str | None:
    """The one of choices that name most likely misspells (letter case aside), or None:
    the "did you mean" of every lookup of a name in a fixed set."""
    if not isinstance(name, str) or not name or len(name) > SHOWN:
        return None
    folded = {choice.lower(): choice for choice in choices}
    if name.lower() in folded:
        return folded[name.lower()]
    # three letters are one letter from too many others (tpu, cpu): ask for more there
    cutoff = 0.7 if len(name) <= 3 else 0.6
    found = difflib.get_close_matches(name.lower(), list(folded), n=1, cutoff=cutoff)
    return folded[found[0]] if found else None


def did_you_mean(name: object, choices: Iterable[str]) -> str:
    """'; did you mean 'x'?' where name looks like a misspelt choice, else ''."""
    match = close_match(name, choices)
    return f"; did you mean {match!r}?" if match is not None else ""


def _snippet(loc: Loc, text: str, *, code: bool = True) -> str:
    """text written where loc is: ``key: text`` (or ``- text`` for a list's item)."""
    key = loc[-1] if loc else None
    line = f"{key}: {text}" if isinstance(key, str) else (f"- {text}" if loc else text)
    return f"`{line}`" if code else line


def _given(data: Any) -> str:  # noqa: PLR0911 - one branch per kind of value
    """What the spec holds, for a message: its kind and (shortened) value."""
    if data is None:
        return "nothing (null)"
    if isinstance(data, bool):
        return f"the boolean {yaml_flow(data)}"
    if isinstance(data, int | float):
        return f"the number {shown(data)}"
    if isinstance(data, str):
        return f"the string {shown(data)}"
    if isinstance(data, list):
        return f"a list {shown(data)}"
    if isinstance(data, dict):
        return f"a mapping (keys {shown(list(data))})"
    return _kind(data)


def _example(tp: Any, rule: Rule) -> str | None:
    """A valid value of the field as YAML, where one is known."""
    if rule.example is not None:
        return rule.example
    if rule.choices is not None:
        return yaml_flow(rule.choices()[0])
    if tp is bool:
        return "true"
    if tp is int:
        return str(rule.ge if rule.ge is not None else 1)
    return None


def _wrong_type(tp: Any, rule: Rule, data: Any, loc: Loc) -> str:
    """A scalar field given a value of another type."""
    head = f"expected {_name(tp)}, got {_given(data)}"
    example = _example(tp, rule)
    folded = str(data).lower() if isinstance(data, str | int) else None
    if tp is bool and folded in _TRUE_WORDS | _FALSE_WORDS:
        word = "true" if folded in _TRUE_WORDS else "false"
        return f"{head}; write {_snippet(loc, word)} (true or false, without quotes)"
    if tp is int and isinstance(data, str) and data.strip().isdigit() and data.isascii():
        return f"{head}; write it without quotes: {_snippet(loc, data.strip())}"
    if tp is str and isinstance(data, bool):
        fix = "write the value in quotes (YAML reads an unquoted yes, no, on, off, true or "
        fix += "false as a boolean)"
        return f"{head}; {fix}" + (f", e.g. {_snippet(loc, example)}" if example else "")
    if example is None:
        return head
    if data is None:
        return f"{head}; give a value, e.g. {_snippet(loc, example)}"
    return f"{head}; write e.g. {_snippet(loc, example)}"


def _not_a_choice(data: Any, choices: Iterable[Any], loc: Loc) -> str:
    """A value outside a fixed set (an enum, a literal, a plug-in's name)."""
    values = list(choices)
    if len(values) == 1:
        one = yaml_flow(values[0])
        return f"expected {one}, got {_given(data)}; write {_snippet(loc, one)}"
    hint = did_you_mean(data, [str(v) for v in values])
    return f"{shown(data)} is not one of {_choices(values)}{hint}"


def _not_a_list(item: Any, rule: Rule, data: Any, loc: Loc) -> str:
    what = rule.what or f"a list of {_plural(item)}"
    head = f"expected {what}, got {_given(data)}"
    example = f"e.g. {_snippet(loc, rule.example)}" if rule.example else ""
    one = isinstance(data, str | int | float) and not isinstance(data, bool)
    if one and item is str and len(str(data)) <= SHOWN and str(data).isprintable():
        wrapped = _snippet(loc, f"[{yaml_flow(str(data))}]")
        return f"{head}; write it as a list of one item: {wrapped}" + (
            f", or {example}" if example else ""
        )
    fix = example or f"write the items in brackets, {_snippet(loc, '[a, b]')}"
    return f"{head}; {'write ' if example else ''}{fix}"


def _plural(item: Any) -> str:
    if item is str:
        return "strings"
    if dataclasses.is_dataclass(item):
        names = [f.name for f in dataclasses.fields(item)]
        return f"mappings ({', '.join(names)})"
    return "values"


def _not_a_mapping(rule: Rule, data: Any, loc: Loc) -> str:
    # what was given is not shown: a mapping's values may be secrets (launch.env)
    head = f"expected {rule.what or 'a mapping of names to strings'}, got {_kind(data)}"
    named = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=", data) if isinstance(data, str) else None
    if named:
        wrapped = _snippet(loc, f"{{{named[1]}: {_QUOTED_SECRET}}}")
        return f"{head} (NAME=value); write it as a mapping: {wrapped}, one key per name"
    example = rule.example or "{NAME: value}"
    return f"{head}; write e.g. {_snippet(loc, example)}"


def _not_a_record(cls: type[Any], data: Any, loc: Loc) -> str:
    names = [f.name for f in dataclasses.fields(cls) if _rule(f).extras is None]
    keys = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    head = f"expected a mapping of keys ({keys}), got {_given(data)}"
    if isinstance(data, bool) and "enabled" in names:
        return f"{head}; write {_snippet(loc, '{enabled: ' + yaml_flow(data) + '}')}"
    return f"{head}; write its keys below it, e.g. {_snippet(loc, _record_example(cls))}"


def _record_example(cls: type[Any]) -> str:
    """A small valid value of a record as YAML: its required keys, then defaults up to two."""
    required: list[str] = []
    optional: list[str] = []
    for f in dataclasses.fields(cls):
        rule = _rule(f)
        if rule.extras is not None:
            continue
        tp = _hints(cls)[f.name]
        if dataclasses.is_dataclass(tp):
            example: str | None = _record_example(typing.cast("type[Any]", tp))
        else:
            example = _example(tp, rule)
        is_required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if example is not None or is_required:
            (required if is_required else optional).append(f"{f.name}: {example or '...'}")
    shown_keys = required + optional[: max(0, 2 - len(required))]
    return "{" + ", ".join(shown_keys) + "}"


def _choices(values: Any) -> str:
    names = [repr(v) for v in values]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" or {names[-1]}"


def _name(tp: Any) -> str:
    return {str: "a string", int: "a whole number", bool: "true or false"}.get(tp, str(tp))


def _kind(data: Any) -> str:
    if data is None:
        return "nothing (null)"
    kinds = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    kinds |= {list: "a list", dict: "a mapping"}
    return kinds.get(type(data), type(data).__name__)


def json_schema(cls: type[Any], title: str) -> dict[str, Any]:
    """Draft 2020-12 JSON Schema of a record, nested records under $defs."""
    defs: dict[str, Any] = {}
    root = _record_schema(cls, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        **root,
        "$defs": dict(sorted(defs.items())),
    }


def _record_schema(cls: type[Any], defs: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required = []
    for f in dataclasses.fields(cls):
        rule = _rule(f)
        if rule.extras is not None:
            properties.update((extra.name, _extra_schema(extra)) for extra in rule.extras())
            continue
        if rule.sections is not None:
            properties.update(
                (key, _type_schema(section, Rule(), defs))
                for key, section in rule.sections().items()
            )
            continue
        prop = _type_schema(_hints(cls)[f.name], rule, defs)
        if rule.description:
            prop["description"] = rule.description
        if f.default is not dataclasses.MISSING:
            prop["default"] = dump(f.default)
        elif f.default_factory is dataclasses.MISSING:
            required.append(f.name)
        properties[f.name] = prop
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if cls.__doc__:
        schema["description"] = " ".join(cls.__doc__.split())
    if required:
        schema["required"] = required
    return schema


def _type_schema(  # noqa: PLR0911 - one branch per kind of type
    tp: Any, rule: Rule, defs: dict[str, Any]
) -> dict[str, Any]:
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        (inner,) = [arg for arg in args if arg is not type(None)]
        return {"anyOf": [_type_schema(inner, rule, defs), {"type": "null"}]}
    if origin is Literal:
        return {"enum": list(args)}
    if isinstance(tp, type) and issubclass(tp, Enum):
        return {"enum": [member.value for member in tp]}
    if dataclasses.is_dataclass(tp):
        name = typing.cast("type[Any]", tp).__name__
        if name not in defs:
            defs[name] = {}
            defs[name] = _record_schema(typing.cast("type[Any]", tp), defs)
        return {"$ref": f"#/$defs/{name}"}
    if origin is tuple:
        items = _type_schema(args[0], Rule(pattern=rule.items_pattern), defs)
        schema: dict[str, Any] = {"type": "array", "items": items}
        if rule.min_length is not None:
            schema["minItems"] = rule.min_length
        return schema
    if origin is dict:
        names = {"pattern": anchored(rule.keys_pattern)} if rule.keys_pattern else {}
        values = _scalar_schema(args[1], Rule())
        return {"type": "object", "additionalProperties": values} | (
            {"propertyNames": names} if names else {}
        )
    return _scalar_schema(tp, rule)


def anchored(pattern: str) -> str:
    """pattern as a JSON Schema (ECMA-262) reads it the way parse does: a schema pattern
    matches anywhere in the value, parse's re.fullmatch the whole value."""
    return f"^(?:{pattern})$"


def _extra_schema(extra: Extra) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "minLength": 1}
    if extra.pattern:
        schema["pattern"] = anchored(extra.pattern)
    schema["description"] = extra.description
    if extra.default is not None:
        schema["default"] = extra.default
    return schema


def _scalar_schema(tp: Any, rule: Rule) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": {str: "string", int: "integer", bool: "boolean"}[tp]}
    if rule.choices is not None:
        schema["enum"] = list(rule.choices())
    if rule.pattern:
        schema["pattern"] = anchored(rule.pattern)
    if rule.min_length is not None and tp is str:
        schema["minLength"] = rule.min_length
    if rule.ge is not None:
        schema["minimum"] = rule.ge
    if rule.le is not None:
        schema["maximum"] = rule.le
    return schema

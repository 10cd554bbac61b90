"""The record layer under the spec: strict types, closed keys, every problem at once."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

import jsonschema
import pytest
import yaml

from builder.model import Invalid, close_match, dump, field, json_schema, parse, yaml_flow


class Color(str, Enum):
    red = "red"
    blue = "blue"


@dataclass(frozen=True)
class Inner:
    """An inner record."""

    port: int = field(22, ge=1, le=65535)
    on: bool = field(True)


@dataclass(frozen=True)
class Outer:
    """An outer record."""

    name: str = field(pattern=r"^[a-z]+$")
    color: Color = field(Color.red)
    mode: Literal["a", "b"] = field("a")
    maybe: str | None = field(None, min_length=1)
    items: tuple[str, ...] = field((), items_pattern=r"^\w+$", check=lambda v: tuple(sorted(v)))
    env: dict[str, str] = field(default_factory=dict, keys_pattern=r"^[A-Z]+$")
    inner: Inner = field(default_factory=Inner)
    inners: tuple[Inner, ...] = field(())


def problems(data: Any) -> list[tuple[tuple[str | int, ...], str]]:
    with pytest.raises(Invalid) as info:
        parse(Outer, data)
    return info.value.problems


def test_defaults_nested_records_and_normalising_checks() -> None:
    value = parse(Outer, {"name": "x", "items": ["b", "a"], "inners": [{"port": 2}]})
    assert value == Outer(name="x", items=("a", "b"), inners=(Inner(port=2),))
    assert value.color is Color.red


def test_every_problem_with_its_path() -> None:
    found = problems(
        {
            "color": "green",
            "mode": "c",
            "items": ["ok", "not ok"],
            "env": {"lower": "x", "OK": 1},
            "inner": {"port": 0, "on": "yes", "extra": 1},
            "inners": [{}, {"port": True}],
            "bogus": None,
        }
    )
    assert found == [
        (("bogus",), "unknown key 'bogus'; check its spelling (see `builder schema`)"),
        (("name",), "required key is missing"),
        (("color",), "'green' is not one of 'red' or 'blue'"),
        (("mode",), "'c' is not one of 'a' or 'b'"),
        (("items", 1), "'not ok' is not a valid value here (pattern ^\\w+$)"),
        (("env", "lower"), "'lower' is not a valid name here"),
        (
            ("env", "OK"),
            "expected a string, got a number (not shown: it may be a secret); write the "
            'value in quotes: `OK: "..."` (YAML reads an unquoted 1, 1.0, true or null as '
            "another type)",
        ),
        (("inner", "extra"), "unknown key 'extra'; check its spelling (see `builder schema`)"),
        (("inner", "port"), "0 is too small: the minimum is 1"),
        (
            ("inner", "on"),
            "expected true or false, got the string 'yes'; write `on: true` (true or false, "
            "without quotes)",
        ),
        (
            ("inners", 1, "port"),
            "expected a whole number, got the boolean true; write e.g. `port: 22`",
        ),
    ]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"name": 3.1},
            'YAML read 3.1 as a number; write it in quotes: name: "3.1" '
            "(unquoted, 3.10 becomes 3.1)",
        ),
        ({"name": "x", "maybe": ""}, "must not be empty"),
        (
            {"name": "x", "items": "a"},
            "expected a list of strings, got the string 'a'; write it as a list of one "
            "item: `items: [a]`",
        ),
        (
            {"name": "x", "inner": []},
            "expected a mapping of keys (port, on), got a list []; write its keys below "
            "it, e.g. `inner: {port: 22, on: true}`",
        ),
    ],
)
def test_type_messages(data: dict[str, Any], expected: str) -> None:
    assert [message for _, message in problems(data)] == [expected]


def test_null_is_allowed_only_where_optional() -> None:
    assert parse(Outer, {"name": "x", "maybe": None}).maybe is None
    assert problems({"name": None}) == [(("name",), "expected a string, got nothing (null)")]
    assert problems({"name": "x", "inner": {"port": None}}) == [
        (
            ("inner", "port"),
            "expected a whole number, got nothing (null); give a value, e.g. `port: 22`",
        )
    ]


def test_dump_is_plain_json_data() -> None:
    value = parse(Outer, {"name": "x", "color": "blue", "inners": [{}]})
    data = dump(value)
    assert data["color"] == "blue"
    assert data["inners"] == [{"port": 22, "on": True}]
    assert parse(Outer, data) == value


def test_json_schema_agrees_with_parse() -> None:
    schema = json_schema(Outer, "t")
    jsonschema.Draft202012Validator.check_schema(schema)
    good = {"name": "x", "color": "blue", "inners": [{"port": 2}], "env": {"A": "1"}}
    jsonschema.validate(good, schema)
    parse(Outer, good)
    for bad in (
        {"name": "X"},
        {"name": "x", "inner": {"port": 0}},
        {"name": "x", "zz": 1},
        {"name": "x", "env": {"a": "1"}},
        {"name": "x", "mode": "c"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
        with pytest.raises(Invalid):
            parse(Outer, bad)
    assert schema["required"] == ["name"]
    assert schema["properties"]["inner"] == {"$ref": "#/$defs/Inner"}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # every type mismatch: the value given (shortened), what the field takes, a fix
        ({"name": "x", "inner": {"port": "2222"}}, "write it without quotes: `port: 2222`"),
        ({"name": "x", "inner": {"port": 2.5}}, "got the number 2.5; write e.g. `port: 22`"),
        ({"name": "x", "inner": {"on": 0}}, "got the number 0; write `on: false`"),
        ({"name": "x", "inner": "x" * 200}, "got the string 'xxxxxxxx"),
        ({"name": "x", "inners": ["a"]}, "e.g. `- {port: 22, on: true}`"),
        ({"name": "x", "items": 8.0}, "write it as a list of one item: `items: ['8.0']`"),
        ({"name": "x", "items": {"a": 1}}, "got a mapping (keys ['a']); write the items"),
        ({"name": ["x"]}, "expected a string, got a list ['x']"),
        ({"name": True}, "write the value in quotes (YAML reads an unquoted yes"),
        ({"name": "x", "items": [3]}, 'YAML read 3 as a number; write it in quotes: - "3"'),
    ],
)
def test_type_mismatches_name_the_value_and_the_fix(data: dict[str, Any], expected: str) -> None:
    (message,) = [message for _, message in problems(data)]
    assert expected in message
    assert len(message) < 400  # a long value is cut, never echoed whole


def test_a_mapping_given_as_text_never_shows_the_text() -> None:
    (message,) = [m for _, m in problems({"name": "x", "env": "TOKEN=hunter2"})]
    assert "hunter2" not in message
    assert message == (
        "expected a mapping of names to strings, got a string (NAME=value); write it as a "
        'mapping: `env: {TOKEN: "..."}`, one key per name'
    )


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"nmae": "x"}, "unknown key 'nmae'; did you mean 'name'? (see `builder schema`)"),
        (
            {"name": "x", "color": "bleu"},
            "'bleu' is not one of 'red' or 'blue'; did you mean 'blue'?",
        ),
        ({"name": "x", "color": "RED"}, "did you mean 'red'?"),
    ],
)
def test_did_you_mean(data: dict[str, Any], expected: str) -> None:
    assert expected in next(message for _, message in problems(data))


def test_close_match_is_cautious() -> None:
    assert close_match("tpu", ["cpu", "cuda"]) is None  # one letter of three is too far
    assert close_match("cdua", ["cpu", "cuda"]) == "cuda"
    assert close_match("zzz", ["cpu", "cuda"]) is None
    assert close_match(3, ["cpu"]) is None
    assert close_match("x" * 500, ["x"]) is None


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("gpu01", "gpu01"),
        ("gpu[01-04]", "'gpu[01-04]'"),
        ("yes", "'yes'"),
        ("3.10", "'3.10'"),
        ("it's", "'it''s'"),
        (("a", "b:c"), "[a, 'b:c']"),
        ({"A": "1"}, "{A: '1'}"),
        (True, "true"),
        (None, "null"),
    ],
)
def test_yaml_flow_reads_back_as_the_value(value: Any, written: str) -> None:
    assert yaml_flow(value) == written
    expected = list(value) if isinstance(value, tuple) else value
    assert yaml.safe_load(f"k: {written}")["k"] == expected

"""The record layer under the spec: strict types, closed keys, every problem at once."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

import jsonschema
import pytest

from builder.model import Invalid, dump, field, json_schema, parse


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
        (("env", "OK"), "a number: write the value in quotes"),
        (("inner", "extra"), "unknown key 'extra'; check its spelling (see `builder schema`)"),
        (("inner", "port"), "0 is too small: the minimum is 1"),
        (("inner", "on"), "expected true or false, got a string 'yes'"),
        (("inners", 1, "port"), "expected a whole number, got a boolean True"),
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
        ({"name": "x", "items": "a"}, "expected a list, got a string"),
        ({"name": "x", "inner": []}, "expected a mapping of keys, got a list"),
    ],
)
def test_type_messages(data: dict[str, Any], expected: str) -> None:
    assert [message for _, message in problems(data)] == [expected]


def test_null_is_allowed_only_where_optional() -> None:
    assert parse(Outer, {"name": "x", "maybe": None}).maybe is None
    assert problems({"name": None}) == [(("name",), "expected a string, got nothing (null)")]


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

"""Image references read with docker's grammar (builder.image.reference): what is taken,
how it is normalised, and what a refusal says (docker's words, and what is wrong in
words; never a pattern). tests/conformance/test_image_reference.py holds the same
against the docker CLI itself."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.errors import UsageError
from builder.image.reference import (
    NAME_PATTERN,
    TAG_PATTERN,
    InvalidReference,
    Reference,
    name_problem,
    parse,
    problem,
)

HEX = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("text", "domain", "path", "tag", "digest"),
    [
        ("ubuntu", "docker.io", "library/ubuntu", None, None),
        ("ubuntu:22.04", "docker.io", "library/ubuntu", "22.04", None),
        ("docker.io/ubuntu", "docker.io", "library/ubuntu", None, None),
        ("index.docker.io/team/x", "docker.io", "team/x", None, None),
        ("team/a---b:1", "docker.io", "team/a---b", "1", None),
        ("localhost/x", "localhost", "x", None, None),
        ("localhost:5000/team/train", "localhost:5000", "team/train", None, None),
        ("Registry.Example:5000/team/x", "Registry.Example:5000", "team/x", None, None),
        ("Team/x", "Team", "x", None, None),
        ("[::1]:5000/x:2", "[::1]:5000", "x", "2", None),
        ("a_b.com/x", "", "a_b.com/x", None, None),
        ("localhost:5000", "docker.io", "library/localhost", "5000", None),
        (f"team/x:1@sha256:{HEX}", "docker.io", "team/x", "1", f"sha256:{HEX}"),
    ],
)
def test_docker_takes_and_normalises(
    text: str, domain: str, path: str, tag: str | None, digest: str | None
) -> None:
    assert parse(text) == Reference(domain, path, tag, digest)
    assert problem(text) is None


def test_normalised_and_familiar_forms() -> None:
    ubuntu = parse("ubuntu:22.04")
    assert ubuntu.normalized() == str(ubuntu) == "docker.io/library/ubuntu:22.04"
    assert ubuntu.familiar() == "ubuntu:22.04"
    assert parse("docker.io/library/team/x").familiar() == "library/team/x"
    assert parse("index.docker.io/team/x").familiar() == "team/x"
    assert parse("registry:5000/team/x@sha256:" + HEX).familiar_name == "registry:5000/team/x"
    assert parse("team/train").with_default_tag().familiar() == "team/train:latest"
    pinned = parse(f"team/x@sha256:{HEX}")
    assert pinned.with_default_tag() is pinned


@pytest.mark.parametrize(
    ("text", "reason", "words"),
    [
        ("team/a.-b", "invalid reference format", "the path component 'a.-b'"),
        ("team/a___b", "invalid reference format", "one or two '_'"),
        ("team/", "invalid reference format", "empty component"),
        (
            "team/X",
            "invalid reference format: repository name (team/X) must be lowercase",
            "lowercase",
        ),
        ("", "invalid reference format", "it is empty"),
        ("team/x y", "invalid reference format", "a space"),
        ("tëam/x", "invalid reference format", "'ë' (U+00EB"),
        ("team/x:.1", "invalid reference format", "the tag '.1'"),
        ("team/x:" + "t" * 129, "invalid reference format", "1 to 128"),
        ("-registry.io/x", "invalid reference format", "the registry '-registry.io'"),
        ("team/x:1:2", "invalid reference format", "':'"),
        ("a" * 248, "repository name must not be more than 255 characters", "library/"),
        (
            HEX,
            f"invalid repository name ({HEX}), cannot specify 64-byte hexadecimal strings",
            "image ID",
        ),
        (
            f"x@sha256:{HEX[:40]}",
            "invalid checksum digest length",
            "40 hex digits where sha256 has 64",
        ),
        (f"x@sha256:{HEX.upper()}", "invalid checksum digest format", "lowercase hex"),
        (f"x@md5:{HEX[:32]}", "unsupported digest algorithm", "sha256:, sha384: or sha512:"),
        ("x@sha256:123", "invalid reference format", "digest of a pinned image"),
        (f"x@sha256:{HEX}\n", "invalid reference format", "a line break in the digest of a pinned"),
        (f"x@sha256:{HEX}@sha256:{HEX}", "invalid reference format", "more than one '@'"),
    ],
)
def test_a_refusal_says_what_docker_says_and_what_is_wrong(
    text: str, reason: str, words: str
) -> None:
    with pytest.raises(InvalidReference) as caught:
        parse(text, field="--image")
    error = caught.value
    assert isinstance(error, UsageError)
    assert error.exit_code == 2
    assert error.reason == reason
    assert words in error.problem
    assert problem(text) == error.problem
    message = str(error)
    assert message.startswith("--image ")
    assert "docker says" in message
    assert "[REGISTRY[:PORT]/]PATH[:TAG][@DIGEST]" in message
    assert "[a-z0-9]" not in message  # the grammar is told in words, never as a pattern
    assert error.field == "--image"
    assert error.value == text


def test_a_repository_name_has_no_tag_or_digest() -> None:
    assert name_problem("registry.example.com:5000/team/train") is None
    assert "no tag" in str(name_problem("team/train:1"))
    assert "no tag" in str(name_problem(f"team/train@sha256:{HEX}"))
    assert "lowercase" in str(name_problem("team/Train"))


def test_the_json_schema_patterns_read_names_and_tags() -> None:
    for name in ("team/a---b", "Registry.Example:5000/team/x", "[::1]:5000/x", "ubuntu"):
        assert re.fullmatch(NAME_PATTERN, name)
    for name in ("team/a.-b", "team/X", "team/", "team/x:1"):
        assert not re.fullmatch(NAME_PATTERN, name)
    assert re.fullmatch(TAG_PATTERN, "1.0_rc-1")
    assert not re.fullmatch(TAG_PATTERN, "-1")


def test_a_long_hostile_value_is_read_quickly() -> None:
    # no pattern here backtracks without bound (each would take seconds if one did)
    for text in (
        "a-" * 20_000 + "!",
        "a." * 20_000 + "-",
        "A" * 40_000 + ".com/x!",
        "a__" * 10_000,
    ):
        assert problem(text) is not None


# --- properties ----------------------------------------------------------------------

_alnum = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=6)
_separator = st.sampled_from([".", "_", "__", "-", "--", "---"])
_component = st.builds(
    lambda first, rest: first + "".join(s + a for s, a in rest),
    _alnum,
    st.lists(st.tuples(_separator, _alnum), max_size=3),
)
_path = st.lists(_component, min_size=1, max_size=4).map("/".join)
_host = st.sampled_from(
    ["localhost", "localhost:5000", "registry.example.com", "Registry.Example:443", "[::1]:5000"]
)
_tag = st.from_regex(TAG_PATTERN.removeprefix("^").removesuffix("$"), fullmatch=True).filter(
    str.isascii
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), _host), _path, st.one_of(st.none(), _tag), st.booleans())
def test_every_reference_of_the_grammar_is_taken_whole(
    host: str | None, path: str, tag: str | None, pinned: bool
) -> None:
    text = (f"{host}/" if host else "") + path + (f":{tag}" if tag else "")
    text += f"@sha256:{HEX}" if pinned else ""
    ref = parse(text)
    assert ref.tag == tag
    assert ref.digest == (f"sha256:{HEX}" if pinned else None)
    assert ref.name.endswith(path)  # a first component with '.' or ':' is a host
    assert parse(ref.normalized()) == ref
    assert parse(ref.familiar()) == ref


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("aZ09._-/:@[]+ é\n"), max_size=40))
def test_any_text_is_taken_or_refused_in_words(text: str) -> None:
    wrong = problem(text)
    if wrong is not None:
        with pytest.raises(InvalidReference, match="docker says") as caught:
            parse(text)
        assert caught.value.problem == wrong
        return
    ref = parse(text)
    assert parse(ref.normalized()) == ref
    assert parse(ref.familiar()) == ref

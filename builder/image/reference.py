"""Image references read as docker reads them: ``[REGISTRY[:PORT]/]PATH[:TAG][@DIGEST]``.

The grammar, the checks after it and their order are those of the Go package docker
uses for every reference it is given, written again here (not copied):

- github.com/distribution/reference v0.6.0 (commit ff14fafe2236e51c2894ac07d4bdfc778e96d682):
  regexp.go (the grammar), reference.go (``Parse``: the 255-character path limit, "invalid
  reference format", "repository name must be lowercase") and normalize.go
  (``ParseNormalizedNamed``: docker.io/library/ for a familiar name, a first component
  that is a registry host, the 64-hex image-ID refusal). Its main branch up to commit
  0965666a6ade2e06035fe352e38344be1e68951a (2026-04-18) changes none of it.
- github.com/opencontainers/go-digest v1.0.0 (commit ea51bea511f75cfa3ef6098cc253c5c3609b037a):
  ``Digest.Validate``, which ``Parse`` calls on a digest: sha256, sha384 or sha512 only,
  exactly 64, 96 or 128 lowercase hex digits.

These are what docker/cli vendors from v27.0 on (v28.2.2: vendor.mod), so `docker pull`,
`docker run` and `docker tag` accept exactly what ``parse`` accepts and refuse the rest
with the same words (``InvalidReference.reason``); tests/conformance/test_image_reference.py
holds the two side by side.

Go's regexp and Python's re agree on these patterns once ``\\w`` and ``[[:xdigit:]]`` are
spelled in ASCII and matches are whole (``fullmatch``: ``$`` would pass a trailing line
break). The messages say in words what is wrong; the pattern is never shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.errors import UsageError, shown

# regexp.go, piece by piece
_ALPHANUMERIC = "[a-z0-9]+"
_SEPARATOR = "(?:[._]|__|[-]+)"
_PATH_COMPONENT = f"{_ALPHANUMERIC}(?:{_SEPARATOR}{_ALPHANUMERIC})*"
_PATH = f"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_DOMAIN_COMPONENT = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN = f"(?:{_DOMAIN_NAME}|{_IPV6})(?::[0-9]+)?"
_TAG = "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}"

NAME_PATTERN = f"^(?:{_DOMAIN}/)?{_PATH}$"
"""A repository name without tag or digest, as a JSON Schema pattern (the shape only:
``parse`` also holds the path to 255 characters and refuses a 64-hex image ID)."""
TAG_PATTERN = f"^{_TAG}$"
"""A tag, as a JSON Schema pattern."""

_REFERENCE = re.compile(f"((?:{_DOMAIN}/)?{_PATH})(?::({_TAG}))?(?:@({_DIGEST}))?")
_NAME = re.compile(f"(?:({_DOMAIN})/)?({_PATH})")
_IDENTIFIER = re.compile("[a-f0-9]{64}")
# go-digest v1.0.0: what a digest's algorithm may look like, and the ones it knows
_DIGEST_SHAPE = re.compile("[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+")
_HEX_DIGITS = {"sha256": 64, "sha384": 96, "sha512": 128}

MAX_PATH = 255
"""reference.RepositoryNameTotalLengthMax: the path's length (the registry host aside)."""
DEFAULT_DOMAIN = "docker.io"
_LEGACY_DOMAIN = "index.docker.io"
_OFFICIAL = "library/"
DEFAULT_TAG = "latest"

_FORMAT = "invalid reference format"
_UPPERCASE = "repository name must be lowercase"
_TOO_LONG = f"repository name must not be more than {MAX_PATH} characters"
_DIGEST_FORMAT = "invalid checksum digest format"
_DIGEST_LENGTH = "invalid checksum digest length"
_DIGEST_UNSUPPORTED = "unsupported digest algorithm"
_SHAPE = "[REGISTRY[:PORT]/]PATH[:TAG][@DIGEST], e.g. registry.example.com:5000/team/train:1.0"


class InvalidReference(UsageError):
    """A value that docker would refuse as an image reference (exit code 2, as any bad
    option). Named so as not to shadow Python's builtin ReferenceError."""

    def __init__(self, value: str, reason: str, problem: str, *, field: str | None = None):
        where = f"{field} " if field else ""
        super().__init__(
            f"{where}{shown(value)} is not an image reference docker accepts: {problem} "
            f"(docker says: {shown(reason, quote=False)}). Write {_SHAPE}.",
            field=field,
            value=value,
        )
        self.reason = reason
        """What docker says of it, word for word ("invalid reference format", ...)."""
        self.problem = problem
        """What is wrong, in words."""


@dataclass(frozen=True)
class Reference:
    """A reference as docker holds it once read: normalised (``ubuntu`` is domain
    docker.io, path library/ubuntu), the tag and digest as given (either, both or none)."""

    domain: str
    """The registry host[:port] (docker.io for Docker Hub); empty in docker's one odd
    case, a first component with '.' or ':' that is no host name (``a_b.com/x``)."""
    path: str
    tag: str | None = None
    digest: str | None = None

    @property
    def name(self) -> str:
        """domain/path: docker.io/library/ubuntu."""
        return f"{self.domain}/{self.path}" if self.domain else self.path

    @property
    def familiar_name(self) -> str:
        """The name as docker shows it: ubuntu, team/train, registry:5000/team/train."""
        if self.domain != DEFAULT_DOMAIN:
            return self.name
        rest = self.path.removeprefix(_OFFICIAL)
        return rest if "/" not in rest else self.path  # library/team/x keeps its library/

    def normalized(self) -> str:
        """docker.io/library/ubuntu:22.04: the whole reference, nothing left implicit
        but a missing tag (see with_default_tag)."""
        return self.name + self._suffix()

    def familiar(self) -> str:
        """ubuntu:22.04: the reference as docker prints it."""
        return self.familiar_name + self._suffix()

    def with_default_tag(self) -> Reference:
        """The reference with :latest where it has neither tag nor digest, as `docker
        pull` and `docker run` read a bare name (reference.TagNameOnly)."""
        if self.tag is None and self.digest is None:
            return Reference(self.domain, self.path, DEFAULT_TAG)
        return self

    def __str__(self) -> str:
        return self.normalized()

    def _suffix(self) -> str:
        return (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def parse(text: str, *, field: str | None = None) -> Reference:
    """text read as `docker pull` reads it (reference.ParseNormalizedNamed), or
    InvalidReference saying what is wrong (field: the option or spec field, for the
    message)."""
    reference = _parse(text)
    if isinstance(reference, Reference):
        return reference
    raise InvalidReference(text, reference, _problem(text, reference), field=field)


def on_docker_hub_by_default(text: str) -> bool:
    """text names no registry, so that every engine and kubelet pulls it from Docker Hub
    (docker.io written out is a choice, not a default)."""
    reference = _parse(text)
    first = text.partition("/")[0]
    return (
        isinstance(reference, Reference)
        and reference.domain == DEFAULT_DOMAIN
        and first not in {DEFAULT_DOMAIN, _LEGACY_DOMAIN}
    )


def checked(text: str, *, field: str | None = None) -> Reference:
    """text read as docker reads it (``parse``), and a reference builder can use: its
    registry's port a TCP port (docker's grammar takes any digits there)."""
    reference = parse(text, field=field)
    port = _port_problem(reference)
    if port is not None:
        where = f"{field} " if field else ""
        raise UsageError(f"{where}{shown(text)}: {port}", field=field, value=text)
    return reference


def problem(text: str) -> str | None:
    """What docker refuses in text as an image reference, in words; None if it takes it
    (for checks that collect problems rather than raise)."""
    reference = _parse(text)
    if isinstance(reference, Reference):
        return _port_problem(reference)
    return _problem(text, reference)


def _port_problem(reference: Reference) -> str | None:
    """docker's grammar takes any digits after the registry's ':'; a TCP port is 1 to
    65535, so a registry at another is one no push or pull ever reaches."""
    host, _, port = reference.domain.rpartition(":")
    if host and not host.endswith("]") and ":" in host:
        return None  # an IPv6 address without brackets has no port of its own
    if port.isdigit() and host and not 1 <= int(port) <= 65535:
        return f"the registry's port {port} is not a TCP port (1 to 65535)"
    return None


def name_problem(text: str) -> str | None:
    """As problem, for a repository name that must carry no tag or digest (a spec's
    image.name)."""
    reference = _parse(text)
    if not isinstance(reference, Reference):
        return _problem(text, reference)
    if reference.tag is not None or reference.digest is not None:
        return "a repository name carries no tag (':') or digest ('@'); give those apart"
    return _port_problem(reference)


# --- docker's reading ----------------------------------------------------------------


def _parse(text: str) -> Reference | str:
    """The Reference, or docker's own words for why not."""
    if _IDENTIFIER.fullmatch(text):
        return f"invalid repository name ({text}), cannot specify 64-byte hexadecimal strings"
    domain, remainder = _split_docker_domain(text)
    remote = remainder.partition(":")[0]
    if _go_lower(remote) != remote:
        return f"{_FORMAT}: repository name ({remote}) must be lowercase"
    return _parse_plain(f"{domain}/{remainder}")


def _split_docker_domain(name: str) -> tuple[str, str]:
    """normalize.go's splitDockerDomain: a first component is a registry host when it is
    localhost, holds '.' or ':', or holds a capital (a path may not)."""
    maybe_domain, slash, maybe_remote = name.partition("/")
    if not slash:
        return DEFAULT_DOMAIN, _OFFICIAL + name
    if maybe_domain == _LEGACY_DOMAIN:
        domain, remote = DEFAULT_DOMAIN, maybe_remote
    elif (
        maybe_domain == "localhost"
        or any(c in maybe_domain for c in ".:")
        or _go_lower(maybe_domain) != maybe_domain
    ):
        domain, remote = maybe_domain, maybe_remote
    else:
        domain, remote = DEFAULT_DOMAIN, name
    if domain == DEFAULT_DOMAIN and "/" not in remote:
        remote = _OFFICIAL + remote
    return domain, remote


def _parse_plain(text: str) -> Reference | str:
    """reference.go's Parse."""
    match = _REFERENCE.fullmatch(text)
    if match is None:
        lower = _go_lower(text)
        if lower != text and _REFERENCE.fullmatch(lower):
            return _UPPERCASE
        return _FORMAT
    name, tag, digest = match.groups()
    parts = _NAME.fullmatch(name)
    assert parts is not None  # the name matched the same pattern inside _REFERENCE
    domain, path = parts[1] or "", parts[2]
    if len(path) > MAX_PATH:
        return _TOO_LONG
    if digest is not None and (wrong := _digest_problem(digest)) is not None:
        return wrong
    return Reference(domain, path, tag, digest)


def _digest_problem(digest: str) -> str | None:
    """go-digest's Digest.Validate: None for a digest it takes."""
    algorithm, _, encoded = digest.partition(":")
    if algorithm not in _HEX_DIGITS:
        return _DIGEST_UNSUPPORTED if _DIGEST_SHAPE.fullmatch(digest) else _DIGEST_FORMAT
    if len(encoded) != _HEX_DIGITS[algorithm]:
        return _DIGEST_LENGTH
    return None if re.fullmatch("[a-f0-9]+", encoded) else _DIGEST_FORMAT


def _go_lower(text: str) -> str:
    """Go's strings.ToLower: one rune for one (Python lowers U+0130 to two)."""
    return text.replace("\u0130", "i").lower()


# --- what is wrong, in words -----------------------------------------------------------

_COMPONENT_RULE = (
    "a path component is lowercase letters and digits, joined by one '.', one or two '_' "
    "or any number of '-'"
)
_ALLOWED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@[]+")


def _problem(text: str, reason: str) -> str:
    """Why docker refuses text (reason: its words), said so that a person can fix it."""
    if reason.startswith("invalid repository name ("):
        return "64 hex digits are an image ID, not a name: give the image's name[:tag]"
    if reason == _TOO_LONG:
        path = _split_docker_domain(text.partition("@")[0])[1]
        return (
            f"its repository path is longer than {MAX_PATH} characters (it is {len(path)}, "
            "counting docker.io's library/ for a one-word name)"
        )
    if reason in (_DIGEST_FORMAT, _DIGEST_LENGTH, _DIGEST_UNSUPPORTED):
        return _digest_words(text.partition("@")[2])
    if not text:
        return "it is empty"
    return _format_words(text, reason)


def _digest_words(digest: str) -> str:
    algorithm, _, encoded = digest.partition(":")
    head = f"the digest of a pinned image, {shown(digest)},"
    if algorithm not in _HEX_DIGITS:
        return f"{head} is not sha256:, sha384: or sha512: and hex digits (docker knows no other)"
    if len(encoded) != _HEX_DIGITS[algorithm]:
        wanted = _HEX_DIGITS[algorithm]
        return f"{head} has {len(encoded)} hex digits where {algorithm} has {wanted}"
    return f"{head} must be written in lowercase hex digits"


def _format_words(text: str, reason: str) -> str:
    """The first part of text (a character, the digest, the tag, the host, the path) that
    docker cannot read: found by splitting text as docker would, then reading each part
    alone."""
    named, at, digest = text.partition("@")
    name, tag = named, None
    head, colon, tail = named.rpartition(":")
    if colon and "/" not in tail:
        name, tag = head, tail
    return (
        _character_words(text, digest)
        or (_digest_shape_words(digest) if at else None)
        or _tag_words(tag)
        or _name_words(name, reason)
        or f"docker cannot read it as {_SHAPE.partition(',')[0]}"
    )


def _character_words(text: str, digest: str) -> str | None:
    bad = next((c for c in text if c not in _ALLOWED), None)
    if bad is None:
        return None
    where = " in the digest of a pinned image" if bad in digest else ""
    return f"it holds {_character(bad)}{where}, which no reference may hold"


def _digest_shape_words(digest: str) -> str | None:
    if "@" in digest:
        return "it holds more than one '@' (one digest, after the name and tag)"
    if not re.fullmatch(_DIGEST, digest):
        return (
            f"the digest of a pinned image, {shown(digest)}, is not ALGORITHM:HEX "
            "(sha256: and 64 lowercase hex digits)"
        )
    return None


def _tag_words(tag: str | None) -> str | None:
    if tag is None or re.fullmatch(_TAG, tag):
        return None
    return (
        f"the tag {shown(tag)} is not 1 to 128 letters, digits, '_', '.' and '-', "
        "the first not '.' or '-'"
    )


def _name_words(name: str, reason: str) -> str | None:
    first, slash, rest = name.partition("/")
    if slash and (":" in first or "." in first or first == "localhost"):
        if not re.fullmatch(_DOMAIN, first):
            return (
                f"the registry {shown(first)} is not a host name (letters, digits and '-', "
                "in parts joined by '.', no part starting or ending with '-') or an [IPv6] "
                "address, with an optional :PORT of digits"
            )
        name = rest
    if ":" in name:
        return "it holds a ':' that is neither a registry's :PORT nor the one before a tag"
    if not name:
        return "it names no repository (nothing before ':' or '@')"
    if reason == _UPPERCASE or _go_lower(name) != name:
        return "its repository path must be lowercase (only a registry host may hold capitals)"
    return _path_words(name)


def _path_words(path: str) -> str | None:
    for component in path.split("/"):
        if not component:
            return "its path has an empty component (a '/' at the start or end, or '//')"
        if not re.fullmatch(_PATH_COMPONENT, component):
            return f"the path component {shown(component)} breaks the rule: {_COMPONENT_RULE}"
    return None


def _character(c: str) -> str:
    names = {" ": "a space", "\n": "a line break", "\r": "a carriage return", "\t": "a tab"}
    if c in names:
        return names[c]
    if not c.isprintable():
        return f"the control character U+{ord(c):04X}"
    if not c.isascii():
        return f"{c!r} (U+{ord(c):04X}; only ASCII letters, digits and ._-/:@ are taken)"
    return repr(c)

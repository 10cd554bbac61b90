"""The exception tree and the one place that maps it to exit codes.

Every error a user can cause is a ``BuilderError`` whose message is a short
paragraph saying what is wrong and what to do; the CLI prints it without a
traceback. Anything else escaping the library is a bug and keeps its
traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SHOWN = 60
"""How much of a value a message shows: a 1 MB value is named, not repeated."""


def shown(value: object, *, quote: bool = True, limit: int = SHOWN) -> str:
    """value for a message: its repr (or str), cut to limit characters with '...'."""
    text = repr(value) if quote else str(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


_LONG_WORD = re.compile(rf"\S{{{4 * SHOWN},}}")
MAX_LINE = 2000


def clipped(message: str) -> str:
    """message with any long run of text cut (and every line held to MAX_LINE): the one
    backstop, where messages are shown, for a value nobody shortened."""
    short = _LONG_WORD.sub(lambda m: f"{m[0][:SHOWN]}... ({len(m[0])} characters)", message)
    return "\n".join(
        line if len(line) <= MAX_LINE else f"{line[:MAX_LINE]}... ({len(line)} characters)"
        for line in short.split("\n")
    )


class BuilderError(Exception):
    """Base of every user-facing error; ``exit_code`` is what the CLI returns."""

    exit_code = 1


@dataclass(frozen=True)
class Problem:
    """One problem in a spec: where it is and what to do about it."""

    path: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path} (line {self.line})" if self.line else self.path
        return f"{where}: {self.message}"


class SpecError(BuilderError):
    """The spec (YAML or preset) is malformed, incomplete or contradictory."""

    exit_code = 1

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = tuple(problems)
        count = len(problems)
        head = f"{source}: {count} problem{'s' if count != 1 else ''} in the spec"
        super().__init__("\n".join([head, *(f"  - {p}" for p in problems)]))


class UsageError(BuilderError):
    """Options that do not fit together, or a missing input file."""

    exit_code = 2


class OutputExists(BuilderError):
    """Refusing to overwrite a file the user did not ask us to replace."""

    exit_code = 3


class LintError(BuilderError):
    """Rendered output failed a linter (hadolint, BuildKit parser, def-file rules)."""

    exit_code = 4


class ToolMissing(BuilderError):
    """An optional external tool (e.g. hadolint) is not installed."""

    exit_code = 5


class EngineUnavailable(BuilderError):
    """No Docker engine answers at DOCKER_HOST or the default socket."""

    exit_code = 10


class NotInEngine(BuilderError):
    """An image or container the command names is not in the engine."""

    exit_code = 14


class BuildError(BuilderError):
    """The engine ran the build (or started a container) and a step failed."""

    exit_code = 11

    def __init__(self, message: str, created: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.created = created
        """Images the failed build made before it stopped (its caller may remove them)."""


class RehearsalFailed(BuilderError):
    """A rehearsal ran and found a fault: a node, a rank, the environment or a timeout."""

    exit_code = 12


class DriftFound(BuilderError):
    """verify or diff found environments that differ."""

    exit_code = 13


class PreflightFailed(BuilderError):
    """preflight ran on the nodes and named a problem: a node, device, rate, link,
    transport or environment."""

    exit_code = 15


class NodeUnreachable(BuilderError):
    """A node did not answer over ssh; nothing was started."""

    exit_code = 16


class RegistryUnreachable(BuilderError):
    """The registry of an image does not answer (or refused it for another reason)."""

    exit_code = 17


class RegistryRefused(BuilderError):
    """The registry refused the credentials (or there were none)."""

    exit_code = 18


class UnknownDigest(BuilderError):
    """The registry has no image with the digest that was asked for."""

    exit_code = 19


class TransferFailed(BuilderError):
    """A node did not get the image (builder ship): its load failed, or what arrived is
    another image."""

    exit_code = 20


class Interrupted(BuilderError):
    """The user pressed Ctrl-C; whatever was under way was stopped cleanly."""

    exit_code = 130


EXIT_CODES: dict[str, int] = {
    cls.__name__: cls.exit_code
    for cls in (
        SpecError,
        UsageError,
        OutputExists,
        LintError,
        ToolMissing,
        EngineUnavailable,
        BuildError,
        NotInEngine,
        RehearsalFailed,
        DriftFound,
        PreflightFailed,
        NodeUnreachable,
        RegistryUnreachable,
        RegistryRefused,
        UnknownDigest,
        TransferFailed,
        Interrupted,
    )
}
"""Documented exit codes by error class (README's table is checked against it)."""

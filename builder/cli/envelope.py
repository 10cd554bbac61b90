"""The one shape of `--json` output: every command prints the same small envelope,
once, whether it succeeded, found a problem or failed before it had a result.

    {"schema": 1, "command": "launch", "ok": true, "exit_code": 0,
     "error": null, "result": {...}}

A command hands its result to ``set_result``; ``BuilderGroup.invoke`` (app.py) prints the
envelope at the end with the exit code and, on an error, its message.
Human-readable lines go to stderr under --json, so stdout holds one JSON document.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any

import typer

from builder.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from pathlib import Path

    from typer import Context

SCHEMA = 1
"""The envelope's version: a field renamed or removed is a new number; one added is not."""
WANTED = "builder.json"
"""ctx.meta key: --json was given to this run's command."""
RESULT = "builder.result"
"""ctx.meta key: what the command handed over for the envelope's result."""
_RUN: ContextVar[dict[str, Any] | None] = ContextVar("builder.run", default=None)
"""The running command's ctx.meta (shared by its whole context chain), for set_result:
typer does not export click's get_current_context."""


def _wants_json(ctx: typer.Context, value: bool) -> bool:
    """--json's callback: the run is marked before any other option is read (eager), so a
    refused option value is reported in the envelope too."""
    if value:
        ctx.meta[WANTED] = True
    return value


JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        callback=_wants_json,
        is_eager=True,
        help="Print one JSON document: {schema, command, ok, exit_code, error, result}.",
    ),
]


def has_json_option(params: Iterable[Any]) -> bool:
    """Whether a command's parameters include this --json (not an older, plain flag)."""
    return any(getattr(p.callback, "__wrapped__", None) is _wants_json for p in params)


def wanted(ctx: Context) -> bool:
    return bool(ctx.meta.get(WANTED))


@contextmanager
def collecting(ctx: Context) -> Iterator[None]:
    """While a command runs (BuilderGroup.invoke), set_result hands its result to ctx."""
    token = _RUN.set(ctx.meta)
    try:
        yield
    finally:
        _RUN.reset(token)


def set_result(result: Any) -> None:
    """The command's result, as plain JSON data, for the --json envelope."""
    meta = _RUN.get()
    if meta is None:
        raise RuntimeError("set_result is for a command run by the builder app")
    meta[RESULT] = result


def envelope(command: str | None, exit_code: int, error: str | None, result: Any) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "command": command,
        "ok": exit_code == 0,
        "exit_code": exit_code,
        "error": error,
        "result": result,
    }


def print_envelope(ctx: Context, exit_code: int, error: str | None = None) -> None:
    """The envelope of this run on stdout; the result only where the command kept one."""
    data = envelope(ctx.invoked_subcommand, exit_code, error, ctx.meta.get(RESULT))
    typer.echo(json.dumps(data, indent=2))


def files_result(
    paths: Iterable[Path | str], next_commands: Iterable[str] = ()
) -> dict[str, list[str]]:
    """The result of a command that writes files: their paths, in the order written, and
    the exact commands that come next ("next"), which it prints on stderr (``say_next``)."""
    return {"files": [str(path) for path in paths], "next": list(next_commands)}


def say_next(commands: Iterable[str]) -> tuple[str, ...]:
    """The exact commands that come next, each on its own `next:` line of stderr: stdout
    stays the command's own output, for pipes."""
    said = tuple(commands)
    for command in said:
        typer.echo(f"next: {command}", err=True)
    return said


def refuse_stdout(as_json: bool, output: Path | None) -> None:
    """--json lists the files written; output printed to stdout (no -o, or -o -) would
    mix with the envelope, so the two are refused together."""
    if as_json and (output is None or str(output) == "-"):
        raise UsageError("--json lists the files written: give -o FILE (not stdout)")

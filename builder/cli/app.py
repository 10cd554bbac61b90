"""The `builder` application: its options, and the one place that turns a
``BuilderError`` into a red message and its exit code (``BuilderGroup``)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from builder._version import __version__
from builder.errors import BuilderError


class BuilderGroup(TyperGroup):
    """Maps library errors to a one-paragraph message and exit code (no traceback)."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except BuilderError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(exc.exit_code) from None


app = typer.Typer(
    cls=BuilderGroup,
    name="builder",
    help="Reproducible multi-node training environments from one stack spec.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"builder {__version__}")
        raise typer.Exit


@app.callback()
def _main(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    version: Annotated[  # noqa: ARG001 - handled eagerly by its callback
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    ctx.obj = {"debug": debug}


def main() -> None:
    """Console-script entry point."""
    sys.exit(app())

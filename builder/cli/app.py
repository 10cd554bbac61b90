"""The `builder` application: its options, its commands, and the one place that turns a
``BuilderError`` into a red message and its exit code (``BuilderGroup``).

A command's module is imported when the command is asked for (click's lazy
group pattern): `builder render` loads the stack and image modules, not the
engine, the rehearsal or the fingerprints. ``COMMANDS`` is the --help order.
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Any

import typer
import typer.main
from typer._click.exceptions import UsageError as ClickUsageError
from typer.core import TyperGroup

from builder._version import __version__
from builder.errors import BuilderError, clipped

COMMANDS: dict[str, str] = {
    # the stack and its files (no engine), and their linters
    "presets": "stack",
    "init": "stack",
    "render": "stack",
    "lint": "lint",
    "schema": "stack",
    # images in the engine
    "build": "image",
    "inspect": "image",
    # running it on a cluster
    "hostfile": "cluster",
    "keys": "cluster",
    "dsenv": "cluster",
    "launch": "cluster",
    "bundle": "cluster",
    "slurm": "cluster",
    "sif": "cluster",
    "rehearse": "rehearse",
    "preflight": "preflight",
    # the same environment everywhere
    "lock": "environment",
    "fingerprint": "environment",
    "verify": "environment",
    "diff": "environment",
}
"""Command -> the module of builder.cli that defines it."""


class BuilderGroup(TyperGroup):
    """Loads a command's module when the command is asked for; maps library errors to a
    one-paragraph message and exit code (no traceback)."""

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]  # noqa: ARG002
        return list(COMMANDS)

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:  # type: ignore[override]
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(f"{__package__}.{COMMANDS[cmd_name]}")
            info = next(
                info
                for info in app.registered_commands
                if info.callback is not None and info.callback.__name__ == cmd_name
            )
            self.commands[cmd_name] = typer.main.get_command_from_info(
                info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except BuilderError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            typer.secho(f"error: {clipped(str(exc))}", fg=typer.colors.RED, err=True)
            raise typer.Exit(exc.exit_code) from None
        except ClickUsageError as exc:
            exc.message = clipped(exc.message)  # an option's value, shown whole by click
            raise


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

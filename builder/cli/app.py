"""The `builder` application: its options, its commands, and the one place that turns a
``BuilderError`` into a red message and its exit code (``BuilderGroup``).

A command's module is imported when the command is asked for (click's lazy
group pattern): `builder render` loads the stack and image modules, not the
engine, the rehearsal or the fingerprints. ``COMMANDS`` is the --help order.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated, Any

import typer
import typer.main
from typer._click.exceptions import UsageError as ClickUsageError
from typer.core import TyperGroup, TyperOption

from builder._version import __version__
from builder.cli.envelope import WANTED, has_json_option, print_envelope, wanted
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
    "push": "image",
    "ship": "image",
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
        command = super().get_command(ctx, cmd_name)
        if command is not None and not any(p.name == "debug" for p in command.params):
            command.params.append(_debug_after_command())
        return command

    def resolve_command(  # type: ignore[override]
        self, ctx: typer.Context, args: list[str]
    ) -> tuple[str | None, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        before_dashes = rest[: rest.index("--")] if "--" in rest else rest
        if "--json" in before_dashes and command is not None and has_json_option(command.params):
            ctx.meta[WANTED] = True  # so a usage error found while parsing is enveloped too
        return name, command, rest

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            done = super().invoke(ctx)
        except BuilderError as exc:
            message = clipped(str(exc))
            if wanted(ctx):  # stdout holds the envelope, --debug or not
                print_envelope(ctx, exc.exit_code, message)
            if ctx.obj and ctx.obj.get("debug"):
                raise
            say_error(f"error: {message}")
            raise typer.Exit(exc.exit_code) from None
        except ClickUsageError as exc:
            exc.message = clipped(exc.message)  # an option's value, shown whole by click
            if wanted(ctx):
                print_envelope(ctx, exc.exit_code, exc.format_message())
            raise
        except KeyboardInterrupt:
            if wanted(ctx):
                print_envelope(ctx, 130, "interrupted")
            raise
        except (typer.Exit, SystemExit):
            raise
        except Exception as exc:  # a bug: its traceback follows, and --json still gets one document
            if wanted(ctx):
                print_envelope(ctx, 1, f"{type(exc).__name__}: {clipped(str(exc))}")
            raise
        if wanted(ctx):
            print_envelope(ctx, 0)
        return done


def _set_debug(ctx: Any, param: Any, value: bool) -> None:  # noqa: ARG001 - click's signature
    if value:
        root = ctx.find_root()
        root.obj = {**(root.obj or {}), "debug": True}
        ctx.obj = root.obj


def _debug_after_command() -> TyperOption:
    """--debug on every command too, so it may come after the command's name."""
    return TyperOption(
        param_decls=["--debug"],
        is_flag=True,
        default=False,
        expose_value=False,
        callback=_set_debug,
        help="Show tracebacks.",
    )


def colour(fg: str) -> str | None:
    """fg, or none when NO_COLOR is set and not empty (https://no-color.org)."""
    return None if os.environ.get("NO_COLOR") else fg


def say_error(message: str, fg: str = typer.colors.RED) -> None:
    """A message on stderr, red (or fg) unless NO_COLOR says otherwise."""
    if colour(fg) is None:
        typer.echo(message, err=True)
    else:
        typer.secho(message, fg=fg, err=True)


HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
"""-h is --help on the app and, inherited through the context, on every command."""

app = typer.Typer(
    cls=BuilderGroup,
    name="builder",
    help="Reproducible multi-node training environments from one stack spec.",
    no_args_is_help=True,
    add_completion=True,
    context_settings=HELP_OPTIONS,
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
    ctx.obj = {**(ctx.obj or {}), "debug": debug or bool((ctx.obj or {}).get("debug"))}


def main() -> None:
    """Console-script entry point."""
    sys.exit(app())

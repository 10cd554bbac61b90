"""The `builder` application: its options, its commands, and the one place that turns a
``BuilderError`` into a red message and its exit code (``BuilderGroup``).

A command's module is imported when the command is asked for (click's lazy
group pattern): `builder render` loads the stack and image modules, not the
engine, the rehearsal or the fingerprints. ``COMMANDS`` is the --help order, and
``SUMMARIES`` the line each command has there and in shell completion, so that
listing the commands (at every tab press) imports none of them.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.main
from typer._click.exceptions import UsageError as ClickUsageError
from typer._click.shell_completion import CompletionItem
from typer.core import TyperGroup, TyperOption

from builder._version import __version__
from builder.cli.envelope import WANTED, has_json_option, print_envelope, wanted
from builder.errors import BuilderError, clipped

if TYPE_CHECKING:
    from typer._click.formatting import HelpFormatter

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
    "squashfs": "cluster",
    "rehearse": "rehearse",
    "preflight": "preflight",
    # the same environment everywhere
    "lock": "environment",
    "fingerprint": "environment",
    "verify": "environment",
    "diff": "environment",
}
"""Command -> the module of builder.cli that defines it."""
SUMMARIES: dict[str, str] = {
    "presets": "List the built-in stacks.",
    "init": "Write a preset out as a stack.yaml to edit.",
    "render": "Render the Dockerfile and the Apptainer .def files.",
    "lint": "Check the rendered files (hadolint, BuildKit, .def rules).",
    "schema": "Print the JSON Schema of stack.yaml (for editors).",
    "build": "Build the image through the Docker engine.",
    "push": "Push the built image to its registry; record its digest.",
    "ship": "Put the built image on every node, without a registry.",
    "inspect": "Show which spec built an image, its size and layers.",
    "hostfile": "Write a DeepSpeed/mpirun hostfile (`host slots=N` lines).",
    "keys": "Make the cluster's key pairs, known_hosts and ssh_config.",
    "dsenv": "Write .deepspeed_env, the variables pdsh sets on each node.",
    "launch": "Print the per-node container and launcher commands.",
    "bundle": "Write keys, hostfile, .deepspeed_env and launch commands.",
    "slurm": "Write the sbatch script: one task per node.",
    "sif": "Print the command that builds a SIF from a local image.",
    "squashfs": "Print the command that makes an enroot squashfs (pyxis).",
    "rehearse": "Run the stack's multi-node launch locally, in containers.",
    "preflight": "Prove the cluster before the run, node by node.",
    "lock": "Write stack.lock: the built image's base and its packages.",
    "fingerprint": "Show an environment's fingerprint: OS, packages, torch, env.",
    "verify": "Fingerprint every node and show what differs (exit 13).",
    "diff": "Compare two environments: images, containers or a lock.",
}
"""Command -> its short help (click's ``short_help``): one line of at most 60 characters.
The docstring is the command's full help (`builder render --help`)."""


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
        if command is not None and cmd_name in SUMMARIES:
            command.short_help = SUMMARIES[cmd_name]  # as listed before it was loaded
        if command is not None and not any(p.name == "debug" for p in command.params):
            command.params.append(_debug_after_command())
        return command

    def format_commands(self, ctx: typer.Context, formatter: HelpFormatter) -> None:  # type: ignore[override]  # noqa: ARG002
        """The command list of --help, from SUMMARIES: TyperGroup's would import every
        command's module (and the library behind it) to read one line of each."""
        with formatter.section("Commands"):
            formatter.write_dl(list(SUMMARIES.items()))

    def shell_complete(self, ctx: typer.Context, incomplete: str) -> list[CompletionItem]:  # type: ignore[override]
        """Command names from SUMMARIES, then the options: as format_commands, without
        importing the commands (TyperGroup's loads each one that matches)."""
        commands = [
            CompletionItem(name, help=SUMMARIES[name])
            for name in self.list_commands(ctx)
            if name.startswith(incomplete)
        ]
        return commands + super(TyperGroup, self).shell_complete(ctx, incomplete)

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

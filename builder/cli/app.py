"""The `builder` application: its options, its commands, and the one place that turns
every failure (a ``BuilderError``, or an option or command click could not parse) into a
red one-paragraph message and its documented exit code (``BuilderGroup``).

A command's module is imported when the command is asked for (click's lazy
group pattern): `builder render` loads the stack and image modules, not the
engine, the rehearsal or the fingerprints. ``COMMANDS`` is the --help order, and
``SUMMARIES`` the line each command has there and in shell completion, so that
listing the commands (at every tab press) imports none of them.

Only typer's public names are used (typer bundles its own click from 0.26 and exports
part of it), so that every typer of the supported range runs this module unchanged.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Annotated, Any, NoReturn

import typer
import typer.main
from typer.core import TyperGroup

from builder._version import __version__
from builder.cli.envelope import WANTED, collecting, has_json_option, print_envelope, wanted
from builder.errors import BuilderError, UsageError, clipped, shown

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
    "kubernetes": "cluster",
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
    "kubernetes": "Write Kubeflow TrainJob or PyTorchJob manifests.",
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

EXAMPLES: dict[str, tuple[str, ...]] = {
    "presets": ("builder presets", "builder presets --json"),
    "init": ("builder init --preset cpu-deepspeed -o stack.yaml",),
    "render": ("builder render stack.yaml -o build/", "builder render --preset cuda-deepspeed"),
    "lint": ("builder lint stack.yaml", "builder lint --preset cuda-deepspeed --json"),
    "schema": ("builder schema -o stack.schema.json",),
    "build": ("builder build stack.yaml", "builder build stack.yaml --no-cache"),
    "push": ("builder push stack.yaml",),
    "ship": ("builder ship stack.yaml --check", "builder ship stack.yaml"),
    "inspect": ("builder inspect team/train:1.0",),
    "hostfile": ("builder hostfile stack.yaml -o cluster/hostfile",),
    "keys": ("builder keys stack.yaml --cluster-dir cluster",),
    "dsenv": ("builder dsenv stack.yaml -o cluster/.deepspeed_env",),
    "launch": (
        "builder launch stack.yaml --cluster-dir /shared/cluster",
        "builder launch stack.yaml --runtime apptainer --launcher torchrun",
    ),
    "bundle": (
        "builder bundle stack.yaml -o /shared/cluster",
        "builder bundle stack.yaml -o cluster --node-dir /shared/cluster",
    ),
    "slurm": (
        "builder slurm stack.yaml -o job.sbatch",
        "builder slurm stack.yaml --runtime pyxis --cluster-dir /shared/cluster -o job.sbatch",
    ),
    "kubernetes": ("builder kubernetes stack.yaml -o k8s/train.yaml",),
    "sif": ("builder sif team/train:1.0 -o /shared/images/train.sif",),
    "squashfs": ("builder squashfs team/train:1.0 -o /shared/images/train.sqsh",),
    "rehearse": (
        "builder rehearse stack.yaml --nodes 2",
        "builder rehearse stack.yaml --launcher slurm",
    ),
    "preflight": (
        "builder preflight stack.yaml --cluster-dir /shared/cluster",
        "builder preflight --preset cpu-deepspeed --rehearse --quick",
    ),
    "lock": ("builder lock stack.yaml",),
    "fingerprint": ("builder fingerprint team/train:1.0", "builder fingerprint --container node1"),
    "verify": ("builder verify --hostfile cluster/hostfile --image team/train:1.0",),
    "diff": ("builder diff team/train:1.0 team/train:1.1", "builder diff stack.lock train:1.1"),
}
"""Command -> the examples its --help ends with (each one a command line as typed;
tests/unit/test_cli.py parses every one with the command's own options)."""


def examples_epilog(name: str) -> str | None:
    """The --help's closing lines: the command's examples, kept as written (click's \\b
    marker stops it from re-wrapping them)."""
    lines = EXAMPLES.get(name)
    if not lines:
        return None
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


def _click_usage_error() -> type[Exception]:
    """click's UsageError, the base of every parse failure (unknown option or command,
    missing argument, bad value): typer exports only its subclass BadParameter, so it is
    found through that."""
    for base in typer.BadParameter.__mro__[1:]:
        if issubclass(base, Exception) and base.__name__ == "UsageError":
            return base
    return typer.BadParameter  # not reached while BadParameter is a click UsageError


CLICK_USAGE_ERROR = _click_usage_error()


@dataclass(frozen=True)
class Completion:
    """One shell-completion candidate, as click's completion scripts read it (value, type,
    help): typer does not export click's CompletionItem."""

    value: str
    help: str | None = None
    type: str = "plain"


class BuilderGroup(TyperGroup):
    """Loads a command's module when the command is asked for; turns every failure into
    one message and its exit code (``fail``)."""

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]  # noqa: ARG002 - typer.Context narrows click's Context, which typer does not export
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
            command.epilog = command.epilog or examples_epilog(cmd_name)
        if command is not None and not any(p.name == "debug" for p in command.params):
            command.params.append(_debug_after_command())
        return command

    def format_commands(self, ctx: typer.Context, formatter: Any) -> None:  # type: ignore[override]  # noqa: ARG002
        """The command list of --help, from SUMMARIES, each line whole: TyperGroup's would
        import every command's module (and the library behind it) to read one line of each."""
        with formatter.section("Commands"):
            formatter.write_dl(list(SUMMARIES.items()))

    def shell_complete(self, ctx: typer.Context, incomplete: str) -> list[Any]:  # type: ignore[override]
        """Command names from SUMMARIES, then the options: as format_commands, without
        importing the commands (TyperGroup's loads each one that matches)."""
        commands = [
            Completion(name, help=SUMMARIES[name])
            for name in self.list_commands(ctx)
            if name.startswith(incomplete)
        ]
        return commands + super(TyperGroup, self).shell_complete(ctx, incomplete)

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        """The app's own options are parsed here, before invoke: a bad one is reported as
        every other failure is. No arguments at all prints the help (click's way)."""
        if not args and self.no_args_is_help:  # a question, answered: the help, exit 0
            return super().make_context(info_name, ["--help"], parent, **extra)
        try:
            return super().make_context(info_name, args, parent, **extra)
        except CLICK_USAGE_ERROR as exc:
            fail(_click_context(exc), usage_error(exc))

    def resolve_command(  # type: ignore[override]
        self, ctx: typer.Context, args: list[str]
    ) -> tuple[str | None, Any, list[str]]:
        if args and args[0] not in COMMANDS and args[0][:1] != "-" and not ctx.resilient_parsing:
            raise UsageError(
                f"no command {shown(args[0])}{_did_you_mean(args[0], COMMANDS)}; "
                "`builder -h` lists the commands",
                field="COMMAND",
                value=args[0],
            )
        name, command, rest = super().resolve_command(ctx, args)
        before_dashes = rest[: rest.index("--")] if "--" in rest else rest
        if "--json" in before_dashes and command is not None and has_json_option(command.params):
            ctx.meta[WANTED] = True  # so a usage error found while parsing is enveloped too
        return name, command, rest

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            with collecting(ctx):
                done = super().invoke(ctx)
        except BuilderError as exc:
            fail(ctx, exc)
        except CLICK_USAGE_ERROR as exc:
            fail(ctx, usage_error(exc, ctx))
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


def fail(ctx: Any, exc: BuilderError) -> NoReturn:
    """The one way a run ends on an error: the envelope (with --json), the traceback (with
    --debug), the red paragraph on stderr, and the error's exit code, --debug or not."""
    message = clipped(str(exc))
    if ctx is not None and wanted(ctx):  # stdout holds the envelope, --debug or not
        print_envelope(ctx, exc.exit_code, message)
    if ctx is not None and (ctx.find_root().obj or {}).get("debug"):
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    say_error(f"error: {message}")
    raise typer.Exit(exc.exit_code) from None


def usage_error(exc: Any, ctx: Any = None) -> UsageError:
    """click's parse failure (exc, a click UsageError) as builder's UsageError: the
    command, the option or argument at fault and the value where click names it, what to
    do, and a close match for a mistyped option. ctx: the app's, for a failure click
    raised without one."""
    failed = _click_context(exc)
    if failed is not None:
        where = failed.command_path
    elif ctx is not None and ctx.invoked_subcommand:
        where = f"{ctx.command_path} {ctx.invoked_subcommand}"
    else:
        where = "builder"
    see = f"`{where} -h` lists what it takes"
    param = getattr(exc, "param", None)
    message = clipped(str(exc.message)).rstrip(".")
    if hasattr(exc, "possibilities"):  # click's NoSuchOption
        option = str(exc.option_name)
        names = [] if failed is None else [o for p in failed.command.params for o in _names(p)]
        return UsageError(
            f"{where}: no option {option}{_did_you_mean(option, names)}; {see}", field=option
        )
    if param is not None:
        hint = _hint(param)
        if hasattr(exc, "param_type"):  # click's MissingParameter
            return UsageError(f"{where}: {hint} is missing; {see}", field=hint)
        glue = " " if message[:1] in "'\"" else ": "  # "--format 'x': choose one of ..."
        return UsageError(f"{hint}{glue}{message}; {see}", field=hint)
    return UsageError(f"{where}: {message[:1].lower()}{message[1:]}; {see}")


def _click_context(exc: Any) -> Any:
    return getattr(exc, "ctx", None)


def _names(param: Any) -> list[str]:
    return [*param.opts, *param.secondary_opts] if param.param_type_name == "option" else []


def _hint(param: Any) -> str:
    """How a message names a parameter: its long option, or an argument's metavar."""
    names = _names(param)
    if names:
        return next((n for n in names if n.startswith("--")), names[0])
    return str(param.metavar or param.name or "argument").upper()


def _did_you_mean(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _set_debug(ctx: typer.Context, value: bool) -> None:
    if value:
        root = ctx.find_root()
        root.obj = {**(root.obj or {}), "debug": True}
        ctx.obj = root.obj


def _debug_after_command() -> Any:
    """--debug on every command too, so it may come after the command's name: the option
    of a one-command probe app, built by typer's public get_command in any typer."""
    probe = typer.Typer()

    @probe.command()
    def debug(
        debug: Annotated[
            bool,
            typer.Option(
                "--debug", callback=_set_debug, expose_value=False, help="Show tracebacks."
            ),
        ] = False,
    ) -> None:
        """The probe's one command; never run."""

    return typer.main.get_command(probe).params[0]


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

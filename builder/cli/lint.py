"""`builder lint`: the rendered files checked by the tools that read them."""

from __future__ import annotations

import typer

from builder.cli.app import app
from builder.cli.options import FormatOpt, PresetOpt, SpecArg, choice, stack_of
from builder.image.context import FORMATS
from builder.lint import lint_stack


@app.command()
def lint(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    fmt: FormatOpt = None,
) -> None:
    """Check the rendered outputs with hadolint, BuildKit's parser and the .def rules."""
    chosen = choice(fmt or "all", "--format", FORMATS)
    report = lint_stack(stack_of(spec, preset), chosen)
    typer.echo(report.text())
    report.raise_for_findings()

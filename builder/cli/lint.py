"""`builder lint`: the rendered files checked by the tools that read them."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from builder.cli.app import app
from builder.cli.options import Choice, PresetOpt, SpecArg, stack_of
from builder.image.context import FORMATS
from builder.lint import lint_stack
from builder.lint.sarif import sarif_text


@app.command()
def lint(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    fmt: Annotated[
        Optional[str],  # noqa: UP045 - typer needs a runtime-evaluable annotation on 3.10
        typer.Option(
            "--format",
            "-f",
            click_type=Choice(FORMATS),
            help="Which rendered files to check (default: all).",
            show_default=False,
        ),
    ] = None,
    output_format: Annotated[
        str,
        typer.Option(
            "--output-format",
            click_type=Choice(("text", "sarif")),
            help="How to report: lines, or SARIF 2.1.0 JSON for CI code scanning.",
        ),
    ] = "text",
) -> None:
    """Check the rendered outputs with hadolint, BuildKit's parser and the .def rules."""
    chosen = fmt or "all"
    report = lint_stack(stack_of(spec, preset), chosen)
    if output_format == "sarif":
        typer.echo(sarif_text(report), nl=False)
    else:
        typer.echo(report.text())
    report.raise_for_findings()

"""`builder lint`: the rendered files checked by the tools that read them."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Optional

import typer

from builder import RENDER_FORMATS, lint_stack, sarif_text
from builder.cli.app import app
from builder.cli.envelope import JsonOpt, set_result
from builder.cli.options import Choice, PresetOpt, SpecArg, resolved_of, stack_of
from builder.errors import UsageError


@app.command()
def lint(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    fmt: Annotated[
        Optional[str],  # noqa: UP045 - typer needs a runtime-evaluable annotation on 3.10
        typer.Option(
            "--format",
            "-f",
            **Choice(RENDER_FORMATS).option,
            help="Which rendered files to check (default: all).",
            show_default=False,
        ),
    ] = None,
    output_format: Annotated[
        str,
        typer.Option(
            "--output-format",
            **Choice(("text", "sarif")).option,
            help="How to report: lines, or SARIF 2.1.0 JSON for CI code scanning.",
        ),
    ] = "text",
    as_json: JsonOpt = False,
) -> None:
    """Check the rendered outputs with hadolint, BuildKit's parser and the .def rules."""
    if as_json and output_format == "sarif":
        raise UsageError("--json and --output-format sarif each print a JSON document: pick one")
    chosen = fmt or "all"
    report = lint_stack(resolved_of(stack_of(spec, preset)), chosen)
    set_result(
        {
            "checked": list(report.checked),
            "findings": [asdict(finding) for finding in report.findings],
            "failing": len(report.failing()),
        }
    )
    if output_format == "sarif":
        typer.echo(sarif_text(report), nl=False)
    elif as_json:
        typer.echo(report.text(), err=True)
    else:
        typer.echo(report.text())
    report.raise_for_findings()

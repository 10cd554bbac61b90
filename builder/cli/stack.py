"""Commands about the stack and its rendered files: presets, init, render, schema.

None of them needs the engine: they read a spec (or a preset) and print or write.
"""

from __future__ import annotations

import json
from pathlib import Path  # noqa: TC003 - typer resolves annotations at run time
from typing import Annotated, Optional

import typer

from builder import (
    preset_summaries,
    preset_text,
    primary_output,
    render_outputs,
    spec_json_schema,
    write_files,
)
from builder.cli.app import app
from builder.cli.envelope import JsonOpt, files_result, refuse_stdout, say_next, set_result
from builder.cli.options import (
    DASH,
    BaseImageOpt,
    CaBundleOpt,
    ForceOpt,
    FormatOpt,
    NoLockOpt,
    OutputFileOpt,
    PipExtraOpt,
    PipIndexOpt,
    PresetOpt,
    SpecArg,
    TrustCaOpt,
    WheelhouseOpt,
    folder_option,
    format_of,
    inputs_of,
    print_or_write,
    resolved_of,
    spec_ref,
    stack_of,
)


@app.command()
def presets(
    as_json: JsonOpt = False,
) -> None:
    """List the built-in stacks."""
    rows = preset_summaries()
    set_result([{"name": name, "description": description} for name, description in rows])
    if as_json:
        return
    width = max(len(name) for name, _ in rows)
    for name, description in rows:
        typer.echo(f"{name:<{width}}  {description}")


@app.command()
def init(
    preset: Annotated[str, typer.Option("--preset", "-p", help="Preset to start from.")] = (
        "cuda-deepspeed"
    ),
    output: OutputFileOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Write a preset out as a stack.yaml to edit."""
    refuse_stdout(as_json, output)
    written = print_or_write(preset_text(preset), output, force=force)
    ref = spec_ref(output, None)  # the file just written, as the next commands name it
    after = say_next((f"builder lint {ref}", f"builder build {ref}") if written else ())
    set_result(files_result(written, after))


@app.command()
def render(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "--output", "-o", help="Folder to write the files to (default or -: print one)."
        ),
    ] = None,
    fmt: FormatOpt = None,
    force: ForceOpt = False,
    base_image: BaseImageOpt = None,
    ca_bundle: CaBundleOpt = None,
    trust_ca: TrustCaOpt = False,
    pip_index_url: PipIndexOpt = None,
    pip_extra_index_url: PipExtraOpt = None,
    wheelhouse: WheelhouseOpt = None,
    no_lock: NoLockOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Render the Dockerfile (+ files it copies) and the Apptainer .def files.

    The build-input options and stack.lock change the files exactly as they change
    `builder build` (which also checks that a locked base image is still there).
    """
    refuse_stdout(as_json, output)
    stack = stack_of(spec, preset)
    output = None if output == DASH else output
    if output is not None:
        folder_option(output, "-o")
    chosen = format_of(fmt, has_output=output is not None)
    inputs = inputs_of(
        base_image, ca_bundle, trust_ca, pip_index_url, pip_extra_index_url, wheelhouse
    )
    resolved = resolved_of(stack, inputs, spec=None if no_lock else spec)
    files = render_outputs(resolved, chosen)
    if output is None:
        typer.echo(primary_output(files, chosen).text, nl=False)
        return
    written = write_files(files, output, force=force)
    for path in written:
        typer.echo(f"wrote {path}", err=True)
    after = say_next((f"builder build {spec_ref(spec, preset)}",))
    set_result(files_result(written, after))


@app.command()
def schema(
    output: OutputFileOpt = None,
    force: ForceOpt = False,
) -> None:
    """Print the JSON Schema of stack.yaml (for editors)."""
    text = json.dumps(spec_json_schema(), indent=2, sort_keys=True) + "\n"
    print_or_write(text, output, force=force)

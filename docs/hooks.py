"""MkDocs hook: the reference pages, generated from the code at every build.

The command-line reference walks the click command tree typer makes of
``builder.cli.app``; the spec reference walks the JSON Schema ``builder schema``
prints; the exit codes, the presets and the Python API's names are read from
``builder.errors.EXIT_CODES``, the presets and ``builder._EXPORTS``. None of
these pages exists in the repository, so none can drift from the code.
"""

from __future__ import annotations

import inspect
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files

GENERATED = {
    "reference/cli.md": "cli_page",
    "reference/schema.md": "schema_page",
    "reference/exit-codes.md": "exit_codes_page",
    "reference/presets.md": "presets_page",
    "reference/api.md": "api_page",
    "reference/parity.md": "parity_page",
}
"""Page -> the function below that writes it."""

NOTE = "*Generated from the code when the site is built; it cannot drift from it.*\n"


def _cell(text: object) -> str:
    """text for one markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _first_paragraph(doc: str | None) -> str:
    return inspect.cleandoc(doc or "").split("\n\n", 1)[0]


# the command line ----------------------------------------------------------------------


def _param_row(param: Any, ctx: Any) -> str:
    """The row --help shows for param (its names, what it takes, its help with default),
    as the typer at hand writes it: get_help_record is the one reading of a parameter
    every typer in the range allowed shares."""
    names, meaning = param.get_help_record(ctx)
    return f"| `{names}` | {_cell(meaning)} |"


def _command_section(name: str, command: Any, parent: Any) -> list[str]:
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    usage = " ".join(["builder", name, "[OPTIONS]", *(p.name.upper() for p in arguments)]).replace(
        "builder  ", "builder "
    )
    lines = [f"## `builder {name}`", "", inspect.cleandoc(command.help or ""), ""]
    lines += ["```text", usage, "```", ""]
    params = [p for p in command.params if not getattr(p, "hidden", False)]
    if params:
        ctx = command.context_class(command, info_name=name, parent=parent)
        lines += ["| argument or option | meaning |", "|---|---|"]
        lines += [_param_row(p, ctx) for p in params]
        lines.append("")
    return lines


def command_tree() -> tuple[Any, Any]:
    """The click group typer makes of builder's app, and a context to ask it in."""
    import typer.main

    from builder.cli.app import app

    group = typer.main.get_command(app)
    return group, group.context_class(group, info_name="builder")


def cli_page() -> str:
    group, ctx = command_tree()
    lines = ["# Command-line reference", "", NOTE]
    lines += [
        "Options of `builder` itself (before or after the command):",
        "",
        "| option | meaning |",
        "|---|---|",
    ]
    lines += [
        f"| {', '.join(f'`{o}`' for o in p.opts)} | {_cell(p.help or '')} |" for p in group.params
    ]
    lines += ["", "| command | what it does |", "|---|---|"]
    names = group.list_commands(ctx)
    for name in names:
        command = group.get_command(ctx, name)
        summary = _first_paragraph(command.short_help or command.help)
        lines.append(f"| [`{name}`](#builder-{name}) | {_cell(summary)} |")
    lines.append("")
    for name in names:
        lines += _command_section(name, group.get_command(ctx, name), ctx)
    return "\n".join(lines)


# the spec -------------------------------------------------------------------------------


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        for choice in node.get("anyOf", []):
            if "$ref" in choice or choice.get("type") == "object":
                return _resolve(schema, choice)
        return node
    target: dict[str, Any] = schema
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return {**target, **{k: v for k, v in node.items() if k != "$ref"}}


def _type_of(node: dict[str, Any]) -> str:
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if "anyOf" in node:
        kinds = [_type_of(choice) for choice in node["anyOf"]]
        return " or ".join(k for k in kinds if k != "null") + (
            " or null" if "null" in kinds else ""
        )
    kind = node.get("type", "")
    if kind == "array":
        return f"list of {_type_of(node.get('items', {}))}"
    if kind == "object" and "additionalProperties" in node:
        values = node["additionalProperties"]
        if isinstance(values, dict):
            return f"map of {_type_of(values)}"
    return str(kind)


def _objects(
    schema: dict[str, Any], path: str, node: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """Every object of the schema with its key path, depth first."""
    found = [(path, node)]
    for key, child in node.get("properties", {}).items():
        resolved = _resolve(schema, child)
        name = key
        if resolved.get("type") == "array":
            resolved = _resolve(schema, resolved.get("items", {}))
            name = f"{key}[]"
        if "properties" in resolved:
            found += _objects(schema, f"{path}.{name}" if path else name, resolved)
    return found


def schema_page() -> str:
    from builder.spec.records import spec_json_schema

    schema = spec_json_schema()
    lines = ["# Spec reference (JSON Schema)", "", NOTE]
    lines += [
        "Every key `stack.yaml` takes, read from the JSON Schema that `builder schema`",
        "prints (`builder schema -o stack.schema.json` gives it to an editor). Unknown",
        "keys are errors. [The spec](spec.md) says what each key does in more words.",
        "",
    ]
    for path, node in _objects(schema, "", schema):
        required = set(node.get("required", []))
        lines += [f"## `{path or 'top level'}`", "", _first_paragraph(node.get("description")), ""]
        lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
        for key, child in node.get("properties", {}).items():
            resolved = _resolve(schema, child)
            default = (
                f"`{json.dumps(child['default'])}`"
                if "default" in child
                else ("required" if key in required else "")
            )
            description = child.get("description") or resolved.get("description", "")
            lines.append(
                f"| `{key}` | {_cell(_type_of(resolved))} | {_cell(default)} "
                f"| {_cell(description)} |"
            )
        lines.append("")
    return "\n".join(lines)


# exit codes, presets, the Python API --------------------------------------------------------


def exit_codes_page() -> str:
    from builder import errors

    lines = ["# Exit codes", "", NOTE]
    lines += [
        "`builder` exits with one of these codes (`builder.errors.EXIT_CODES`); 0 is",
        "success. Each is an exception class of `builder.errors` whose `.exit_code` it is;",
        "[Troubleshooting](../troubleshooting.md) says what to do about each.",
        "",
        "| code | error | meaning |",
        "|---|---|---|",
        "| 0 | | success |",
    ]
    for name, code in sorted(errors.EXIT_CODES.items(), key=lambda item: item[1]):
        doc = _first_paragraph(getattr(errors, name).__doc__)
        lines.append(f"| {code} | `{name}` | {_cell(doc)} |")
    return "\n".join(lines) + "\n"


def presets_page() -> str:
    from builder.spec.presets import preset_summaries

    lines = ["# Presets", "", NOTE]
    lines += [
        "The built-in stacks (`builder presets`). `builder init --preset NAME -o",
        "stack.yaml` writes one out to edit; every command takes `--preset NAME` in",
        "place of a spec file. [The spec](spec.md#presets) says more about each.",
        "",
        "| preset | what it is |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {_cell(summary)} |" for name, summary in preset_summaries()]
    return "\n".join(lines) + "\n"


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""


def api_page() -> str:
    import builder

    lines = ["# Python API: every public name", "", NOTE]
    lines += [
        "Every name of `builder.__all__`, in the order of `builder._EXPORTS`, with the",
        "module that defines it and the first paragraph of its docstring.",
        "[The Python API](python-api.md) shows them at work.",
        "",
    ]
    for name, module in builder._EXPORTS.items():
        obj = getattr(builder, name)
        kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "value"
        lines += [f"## `{name}`", "", f"*{kind} in `{module}`*", ""]
        if kind != "value":
            lines += ["```python", f"{name}{_signature(obj)}", "```", ""]
            lines += [_first_paragraph(obj.__doc__), ""]
        else:
            lines += [f"`{_cell(repr(obj))[:200]}`", ""]
    return "\n".join(lines)


# every setting on every site --------------------------------------------------------------


def parity_page() -> str:
    from builder.parity import FOLDER, IMAGE, parity_markdown

    lines = ["# Every setting on every site", "", NOTE]
    lines += [
        "One spec is one run wherever it starts. For each site and each setting, the build",
        "of this page sets the setting to a value found nowhere else, asks that site's",
        "scheduler for the run's folder (`builder bundle --scheduler NAME`, a dry run with",
        f"image `{IMAGE}` and folder `{FOLDER}`) and looks for the value in it. **yes**: the",
        "files the site runs carry it (a secret only in the folder's 0600 files);",
        "**refused**: the command stops with the reason below, and writes nothing. A setting",
        "a site dropped in silence would show as **DROPPED**; the test suite fails on one",
        "(tests/unit/test_parity.py).",
        "",
        "What ran for real: the ssh rehearsal (docker, sshd, pdsh) and a real Slurm, where",
        "each rank's probe checks launch.env and `--set` (deepspeed and torchrun over ssh;",
        "deepspeed, torchrun and srun under Slurm; tests/integration/test_parity.py).",
        "Kubernetes and pyxis did not run here: their files are checked against the",
        "Kubernetes and Kubeflow API models, kubectl's own YAML reader, and pyxis's and",
        "enroot's parsing rules.",
        "",
        "Each column runs the `cpu-deepspeed` preset with the launcher it names (torchrun",
        "where none is named); Slurm's runtime is its own (`launch.slurm.runtime`).",
        "",
        parity_markdown(),
    ]
    return "\n".join(lines)


# the hook --------------------------------------------------------------------------------


def on_files(files: Files, config: MkDocsConfig) -> Files:
    from mkdocs.structure.files import File  # only a build needs MkDocs; the pages do not

    for path, maker in GENERATED.items():
        content = globals()[maker]()
        files.append(File.generated(config, path, content=content))
    return files

"""The shape of the package, read from its source: no import cycle among builder's
modules, imports inside functions only for heavy third-party modules, shared names
in a module that imports nothing of builder, and no branch on an accelerator's or a
launcher's name outside that platform's or launcher's own module."""

from __future__ import annotations

import ast
from pathlib import Path

from builder import platforms
from builder.launch import launchers

PACKAGE = Path(__file__).resolve().parents[2] / "builder"
LAZY_ALLOWED = {"docker", "jinja2", "yaml", "rich", "dockerfile"}
"""Third-party modules whose import costs `builder --help` time: imported where used."""
PAYLOAD_ALLOWED = {"torch", "deepspeed"}
"""Run inside the environment (payload/): torch and DeepSpeed are imported when needed."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(path: Path) -> list[tuple[ast.stmt, str, bool]]:
    """(statement, imported module, inside a function) for every import that runs: those
    under `if TYPE_CHECKING:` only exist for the type checker."""
    found: list[tuple[ast.stmt, str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for statement in node.orelse:
                visit(statement, in_function)
            return
        if isinstance(node, ast.Import):
            found.extend((node, alias.name, in_function) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from builder.launch import launchers` imports the submodule
            subs = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [sub for sub in subs if sub in MODULES] or [node.module]
            found.extend((node, name, in_function) for name in names)
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return found


def _ancestors(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def graph() -> dict[str, set[str]]:
    """builder module -> the builder modules it runs when it is imported.

    Importing ``a.b.c`` first runs the packages ``a`` and ``a.b``: an edge to each,
    but for the importer's own ancestors, which Python has started already (a module
    importing its sibling is no cycle)."""
    edges: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        targets = set()
        for _, module, _ in runtime_imports(path):
            if module in MODULES:
                targets |= {module, *(_ancestors(module) & MODULES.keys())}
        edges[name] = targets - _ancestors(name) - {name}
    return edges


def test_no_import_cycle_among_builder_modules() -> None:
    edges = graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def walk(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                walk(nxt, [*stack, nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            walk(start, [start])
    assert cycles == [], "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_graph_sees_real_edges() -> None:
    """The checker itself: it finds edges, and none through TYPE_CHECKING blocks."""
    edges = graph()
    assert "builder.platforms" in edges["builder.spec.records"]
    assert "builder.launch.launchers" in edges["builder.spec.records"]
    assert "builder.spec.records" not in edges["builder.platforms.cuda"]  # type-only


def test_function_level_imports_are_only_heavy_third_party() -> None:
    offenders = []
    for name, path in MODULES.items():
        allowed = LAZY_ALLOWED | (PAYLOAD_ALLOWED if name.startswith("builder.payload") else set())
        for statement, module, in_function in runtime_imports(path):
            if in_function and module.split(".")[0] not in allowed:
                offenders.append(f"{name}:{statement.lineno} imports {module}")
    assert offenders == []


def test_the_contract_imports_nothing_of_builder() -> None:
    imported = [mod for _, mod, _ in runtime_imports(MODULES["builder.contract"])]
    assert not [mod for mod in imported if mod.startswith("builder")]


def _home(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def test_no_branch_on_a_platform_or_launcher_name_outside_its_module() -> None:
    """`accelerator == "gaudi"`, `launcher in ("deepspeed", ...)`: knowledge of one
    platform or launcher spread where a new one would need an edit too. The payload
    scripts run inside the image, without builder: their "cpu" and "cuda" are torch's
    device types, which a platform names (``Platform.torch_device``)."""
    platform_names = set(platforms.names())
    launcher_names = set(launchers.names())
    offenders = []
    for name, path in MODULES.items():
        if name.startswith("builder.payload."):
            continue
        own = set()
        if name.startswith("builder.platforms."):
            own = {_home(name)}
        elif name.startswith("builder.launch.launchers."):
            own = {launchers.get(n).name for n in launcher_names if _home(name) == n}
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            for operand in [node.left, *node.comparators]:
                values = (
                    [operand]
                    if isinstance(operand, ast.Constant)
                    else list(operand.elts)
                    if isinstance(operand, ast.Tuple | ast.List | ast.Set)
                    else []
                )
                for value in values:
                    if not isinstance(value, ast.Constant) or not isinstance(value.value, str):
                        continue
                    if value.value in (platform_names | launcher_names) - own:
                        offenders.append(f"{name}:{node.lineno} compares with {value.value!r}")
    assert offenders == []


def test_the_formatter_decides_the_layout_everywhere() -> None:
    """No `fmt: skip` or `fmt: off`: a module is split by responsibility, never squeezed
    under a size by hand-made layout (the old line cap bent code that way)."""
    root = Path(__file__).parents[2]
    marker = "fmt" + ": "  # this file must not hold the markers it looks for
    found = [
        f"{path.relative_to(root)}:{number}"
        for folder in ("builder", "tests", "bench")
        for path in sorted((root / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if f"# {marker}skip" in line or f"# {marker}off" in line
    ]
    assert found == []

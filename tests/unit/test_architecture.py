"""The shape of the package, read from its source: no import cycle among builder's
modules, imports inside functions only for heavy third-party modules, shared names
in a module that imports nothing of builder, and no branch on an accelerator's or a
launcher's name outside that platform's or launcher's own module."""

from __future__ import annotations

import ast
from pathlib import Path

from builder import platforms, schedulers
from builder.fabrics import FABRICS
from builder.launch import launchers, runtimes

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


def plugin_names() -> dict[str, set[str]]:
    """The names of every plug-in, by the module (or package) allowed to compare with them:
    platforms, launchers, collective libraries and schedulers (one module each), runtimes
    and runtimes (one module each; a subclass's module owns its own name). A runtime's
    "none" is also the fabric none, so it is left out."""
    homes: dict[str, set[str]] = {}
    for name in platforms.names():
        homes[f"builder.platforms.{name}"] = {name}
    for name in launchers.names():
        homes[f"builder.launch.launchers.{name}"] = {launchers.get(name).name}
    for library in platforms.collectives():
        homes[f"builder.collectives.{library.name}"] = {library.name}
    for name in schedulers.names():
        homes[f"builder.schedulers.{name}"] = {name}
    for run in runtimes.every():
        homes[type(run).__module__] = {run.name} - set(FABRICS)
    homes["builder.image.context"] = {"docker", "apptainer"}  # the output formats' names
    return homes


def _compared(node: ast.Compare) -> list[ast.expr]:
    """The operands a comparison branches on; `"docker" in text` searches a text and
    names nothing (a literal left of `in`, but for a literal collection on the right)."""
    operands = [node.left, *node.comparators]
    searched = isinstance(node.ops[0], ast.In | ast.NotIn) and not isinstance(
        node.comparators[0], ast.Tuple | ast.List | ast.Set
    )
    return operands[1:] if searched else operands


def _constants(tree: ast.Module) -> dict[str, str]:
    """A module's own string constants (``SLURM = "slurm"``, ``A, B = "a", "b"``)."""
    found: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            pairs = (
                zip(target.elts, node.value.elts, strict=False)
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                else [(target, node.value)]
            )
            for name, value in pairs:
                if (
                    isinstance(name, ast.Name)
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    found[name.id] = value.value
    return found


TREES = {name: ast.parse(path.read_text()) for name, path in MODULES.items()}
CONSTANTS = {name: _constants(tree) for name, tree in TREES.items()}


def _named(name: str, tree: ast.Module) -> dict[str, str]:
    """The string constants a module's names stand for: its own and those it imports
    from another builder module (``from builder.x import SLURM``)."""
    named = dict(CONSTANTS[name])
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in CONSTANTS:
            source = CONSTANTS[node.module]
            named.update(
                (alias.asname or alias.name, source[alias.name])
                for alias in node.names
                if alias.name in source
            )
    return named


def _values(operand: ast.expr, named: dict[str, str]) -> list[str]:
    """The strings an operand of a comparison names: a literal, a constant that holds one
    (``SLURM``), or a literal collection of either."""
    items = list(operand.elts) if isinstance(operand, ast.Tuple | ast.List | ast.Set) else [operand]
    found = []
    for item in items:
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            found.append(item.value)
        elif isinstance(item, ast.Name) and item.id in named:
            found.append(named[item.id])
    return found


def _branches_on_names(name: str, tree: ast.Module, names: set[str]) -> list[str]:
    named = _named(name, tree)
    return [
        f"{name}:{node.lineno} compares with {value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        for operand in _compared(node)
        for value in _values(operand, named)
        if value in names
    ]


def _own(name: str, homes: dict[str, set[str]]) -> set[str]:
    """The plug-in names a module may compare with: its own plug-in's (a plug-in package's
    modules share its name)."""
    return set().union(
        *(names for home, names in homes.items() if name == home or name.startswith(home + "."))
    )


def test_no_branch_on_a_plugin_name_outside_its_module() -> None:
    """`accelerator == "gaudi"`, `launcher in ("deepspeed", ...)`, `library == "nccl"`,
    `runtime == "docker"`, `site == SLURM` (a constant that holds a name): knowledge of
    one plug-in spread where a new one would need an edit too. The payload scripts run
    inside the image, without builder: their device types are torch's own (cpu, cuda,
    hpu), which a platform names (``Platform.torch_device``); the backend and the sizes
    come as arguments from the platform and its library."""
    homes = plugin_names()
    every = set().union(*homes.values())
    torch_devices = {"cpu", "cuda", "hpu"}
    offenders = []
    for name, tree in TREES.items():
        allowed = _own(name, homes) | (
            torch_devices if name.startswith("builder.payload.") else set()
        )
        offenders += _branches_on_names(name, tree, every - allowed)
    assert offenders == []


def test_the_name_check_sees_constants() -> None:
    """The checker itself: a comparison through a constant names what the constant holds."""
    tree = ast.parse(
        'SITE = "slurm"\nA, B = "x", "kubernetes"\nif s == SITE or s in (B, "y"): pass'
    )
    CONSTANTS["example"] = _constants(tree)
    try:
        found = _branches_on_names("example", tree, {"slurm", "kubernetes"})
    finally:
        del CONSTANTS["example"]
    assert found == ["example:3 compares with 'slurm'", "example:3 compares with 'kubernetes'"]


def test_the_name_check_knows_every_kind_of_plugin() -> None:
    every = set().union(*plugin_names().values())
    assert {"cuda", "torchrun", "nccl", "hccl", "gloo", "docker", "apptainer", "slurm"} <= every


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


LOOKUPS = {
    ("platforms", "get"),
    ("launchers", "get"),
    ("schedulers", "get"),
    (None, "runtime"),
    (None, "fabric"),
    (None, "get_runtime"),
    (None, "get_launcher"),
    ("builder", "get_runtime"),
    ("builder", "get_launcher"),
}
"""Calls that find a plug-in by its name."""
MAY_LOOK_UP = ("builder.resolved", "builder.spec.check")
"""Where a name becomes a plug-in: the one resolve, and the spec's own checks (which
make a spec resolvable); and each plug-in package, about its own."""


def test_no_module_outside_a_plugin_looks_one_up_by_name() -> None:
    """Every command resolves the stack once (``builder.resolved``) and hands the objects
    down: a module that looks a platform, launcher, runtime, fabric or scheduler up by
    name again is a second resolve."""
    homes = (
        "builder.platforms",
        "builder.launch.launchers",
        "builder.launch.runtimes",
        "builder.schedulers",
    )
    own = ("builder.fabrics",)
    offenders = [
        where
        for name, path in MODULES.items()
        if not (name in MAY_LOOK_UP or name in own or name.startswith(homes))
        for where in _lookups(name, path)
    ]
    assert offenders == []
    assert _lookups("builder.resolved", MODULES["builder.resolved"])  # the check sees them


def _lookups(name: str, path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            called: tuple[str | None, str] = (func.value.id, func.attr)
        elif isinstance(func, ast.Name):
            called = (None, func.id)
        else:
            continue
        if called in LOOKUPS:
            found.append(f"{name}:{node.lineno} calls {'.'.join(filter(None, called))}")
    return found

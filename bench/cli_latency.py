"""Wall time of `builder render --preset cuda-deepspeed` against hpccm on the same image.

A user waits for the whole process, interpreter start and imports included,
so that is what is timed: each command runs as its own subprocess, the
commands take turns (builder, hpccm, builder --help, ...) so that drift in
machine load hits them alike, and the median of N runs is compared. The
targets: builder at most TARGET_RATIO times hpccm rendering
bench/recipes/hpccm_cuda_deepspeed.py, and `builder --help` and a tab press
(shell completion runs the program at each) under HELP_TARGET_MS. The script also
checks that the two Dockerfiles agree (base, packages, pins, environment,
labels, ...) and that `builder --help` imports none of the heavy modules that
keep the CLI slow to start.

Both tools run as installed: Python may write bytecode (PYTHONDONTWRITEBYTECODE
is dropped for the commands), so the warm-up runs leave builder's .pyc files as
pip leaves hpccm's, and no timed run compiles builder from source.

    .venv/bin/python bench/cli_latency.py --runs 15

The figures depend on typer's version (printed): typer 0.29+ coerces every
parameter a command parses through pydantic, whose import a run then pays;
scripts/typer-bounds.sh sets up a venv per bound to run this script in.

Exit status: 0 whenever the figures could be measured (a missed target is a
figure, not an error); 1 when a command fails or prints no Dockerfile.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RECIPE = BENCH / "recipes" / "hpccm_cuda_deepspeed.py"
PRESET = "cuda-deepspeed"
WARMUP_RUNS = 2
TARGET_RATIO = 1.5
HELP_TARGET_MS = 200.0
KUBERNETES_TARGET_MS = 500.0
KUBERNETES_SPEC = """\
name: big
image: {accelerator: cpu, torch: '2.11.0', deepspeed: '0.18.0', fabric: infiniband}
launch: {launcher: deepspeed, nodes: ['gpu[001-064]'], slots: 8, code: /shared/code}
"""
"""A 64-node DeepSpeed run (the MPI TrainJob, the largest manifests) for `builder kubernetes`."""
HEAVY_MODULES = ("docker", "jinja2", "pydantic", "yaml", "rich", "dockerfile")
IGNORED_LABELS = ("io.github.builder.spec-hash", "io.github.builder.system-stage")
"""Labels whose values differ by construction (each tool hashes its own inputs)."""


class BenchError(Exception):
    """A command failed or printed the wrong thing: there are no figures to report."""


@dataclass(frozen=True)
class Command:
    """One command line to time, and whether its stdout must be a Dockerfile."""

    label: str
    argv: tuple[str, ...]
    dockerfile: bool = True
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Timing:
    """Wall times of one command, in milliseconds."""

    label: str
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def fastest(self) -> float:
        return min(self.samples)

    @property
    def slowest(self) -> float:
        return max(self.samples)


def venv_tool(name: str) -> Path:
    """An executable of the venv running this script, so both tools share one Python."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        hint = "pip install -e '.[bench]'" if name == "hpccm" else "pip install -e ."
        raise BenchError(f"{path} not found; install it into this venv: {hint}")
    return path


def _failure(argv: Sequence[str], proc: subprocess.CompletedProcess[str]) -> BenchError:
    stderr = proc.stderr.strip() or "(nothing on stderr)"
    return BenchError(f"{shlex.join(argv)} exited with {proc.returncode}:\n{stderr}")


def installed_env() -> dict[str, str]:
    """This environment, less PYTHONDONTWRITEBYTECODE: see the module's docstring."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_command(command: Command) -> tuple[float, str]:
    """Run once; return (wall time in ms, stdout). Raises BenchError on failure."""
    env = {**installed_env(), **dict(command.env)}
    start = time.perf_counter()
    proc = subprocess.run(
        command.argv, capture_output=True, text=True, cwd=ROOT, env=env, check=False
    )
    elapsed = (time.perf_counter() - start) * 1000.0
    if proc.returncode != 0:
        raise _failure(command.argv, proc)
    if command.dockerfile and not re.search(r"^FROM \S", proc.stdout, re.MULTILINE):
        raise BenchError(f"{shlex.join(command.argv)} printed no FROM line")
    return elapsed, proc.stdout


def time_commands(commands: list[Command], runs: int) -> list[Timing]:
    """Warm up each command, then run them in turn `runs` times."""
    for _ in range(WARMUP_RUNS):
        for command in commands:
            run_command(command)
    samples: list[list[float]] = [[] for _ in commands]
    for _ in range(runs):
        for command, times in zip(commands, samples, strict=True):
            times.append(run_command(command)[0])
    return [Timing(c.label, tuple(t)) for c, t in zip(commands, samples, strict=True)]


@dataclass(frozen=True)
class Import:
    """One line of `python -X importtime`: a module, its cumulative time, its nesting."""

    name: str
    cumulative_us: int
    depth: int


def help_imports(builder: Path) -> list[Import]:
    """Every module `builder --help` imports, read from -X importtime in a real process."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", str(builder), "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=installed_env(),
        check=False,
    )
    if proc.returncode != 0:
        raise _failure(proc.args, proc)
    imports = []
    for line in proc.stderr.splitlines():
        # "import time:   self |  cumulative | <indent>module", nesting shown by indent
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( +)(\S+)$", line)
        if match:
            imports.append(Import(match[3], int(match[1]), depth=(len(match[2]) - 1) // 2))
    return imports


def heavy_imports(imports: list[Import]) -> list[str]:
    """The HEAVY_MODULES (or their submodules) among the imports."""
    names = {i.name for i in imports}
    return sorted(
        heavy
        for heavy in HEAVY_MODULES
        if any(name == heavy or name.startswith(heavy + ".") for name in names)
    )


def _instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, rest = (pending + stripped).partition(" ")
        result.append((keyword.upper(), " ".join(rest.split())))
        pending = ""
    return result


def dockerfile_facts(text: str) -> dict[str, object]:
    """What the image gets, ignoring layout: the two tools lay out and order flags differently."""
    facts: dict[str, list[str]] = {}
    apt: set[str] = set()
    pins: set[str] = set()
    indexes: set[str] = set()
    for keyword, args in _instructions(text):
        if keyword in ("ENV", "LABEL"):
            pairs = [word.partition("=") for word in shlex.split(args)]
            facts.setdefault(keyword, []).extend(
                f"{k}={'<hash>' if k in IGNORED_LABELS else v}" for k, _, v in pairs
            )
        elif keyword == "RUN":
            words = shlex.split(args)
            for i, word in enumerate(words):
                if "==" in word:
                    pins.add(word)
                if word == "--index-url" and i + 1 < len(words):
                    indexes.add(words[i + 1])
                if word == "install" and i > 0 and words[i - 1] == "apt-get":
                    rest = [*words[i + 1 :], "&&"]
                    apt.update(w for w in rest[: rest.index("&&")] if not w.startswith("-"))
        elif keyword != "ARG":  # builder: ARG DEBIAN_FRONTEND; hpccm sets it inline
            facts.setdefault(keyword, []).append(re.sub(r" as ", " AS ", args, flags=re.I))
    return {
        **{k: sorted(v) if k in ("ENV", "LABEL") else v for k, v in facts.items()},
        "apt packages": sorted(apt),
        "pip pins": sorted(pins),
        "pip index": sorted(indexes),
    }


def fact_differences(ours: dict[str, object], theirs: dict[str, object]) -> list[str]:
    """Human-readable differences between two dockerfile_facts results."""
    return [
        f"{key}: builder {ours.get(key)!r} vs hpccm {theirs.get(key)!r}"
        for key in sorted(set(ours) | set(theirs))
        if ours.get(key) != theirs.get(key)
    ]


def format_table(timings: list[Timing]) -> str:
    """An aligned table: one row per command, times in ms."""
    width = max(len(t.label) for t in timings)
    lines = [f"{'command':<{width}}  {'median':>8}  {'min':>8}  {'max':>8}  (ms)"]
    lines += [
        f"{t.label:<{width}}  {t.median:8.1f}  {t.fastest:8.1f}  {t.slowest:8.1f}" for t in timings
    ]
    return "\n".join(lines)


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def measure(runs: int) -> None:
    """Check the two Dockerfiles agree, time the commands, print the figures."""
    with tempfile.TemporaryDirectory(prefix="builder-bench-") as tmp:
        _measure(runs, Path(tmp))


def _measure(runs: int, tmp: Path) -> None:
    builder, hpccm = venv_tool("builder"), venv_tool("hpccm")
    render = Command(
        f"builder render --preset {PRESET}", (str(builder), "render", "--preset", PRESET)
    )
    twin = Command(
        f"hpccm --recipe {RECIPE.relative_to(ROOT)}",
        (str(hpccm), "--recipe", str(RECIPE), "--format", "docker"),
    )
    help_ = Command("builder --help", (str(builder), "--help"), dockerfile=False)
    tab = Command(
        "builder re<TAB> (completion)",
        (str(builder),),
        dockerfile=False,
        env=(
            ("_BUILDER_COMPLETE", "complete_bash"),
            ("COMP_WORDS", "builder re"),
            ("COMP_CWORD", "1"),
        ),
    )
    # what builder is made of, before it does anything: the brief's CLI, YAML and template
    # libraries, imported by a bare interpreter
    floor = Command(
        "python -c 'import typer, yaml, jinja2'",
        (sys.executable, "-c", "import typer, yaml, jinja2"),
        dockerfile=False,
    )

    spec = tmp / "big.yaml"
    spec.write_text(KUBERNETES_SPEC)
    kubernetes = Command(
        "builder kubernetes (64 nodes)",
        (str(builder), "kubernetes", str(spec), "-o", str(tmp / "k8s.yaml"), "--force"),
        dockerfile=False,
    )

    differences = fact_differences(
        dockerfile_facts(run_command(render)[1]), dockerfile_facts(run_command(twin)[1])
    )
    timings = time_commands([render, twin, help_, floor, tab, kubernetes], runs)
    imports = help_imports(builder)
    heavy = heavy_imports(imports)
    # depth 1: what the entry module (builder.cli) itself pulls in
    slowest = sorted((i for i in imports if i.depth == 1), key=lambda i: -i.cumulative_us)[:3]
    ratio = timings[0].median / timings[1].median

    print(
        f"Python {sys.version.split()[0]}, typer {typer_version()}; whole processes, "
        f"{runs} interleaved runs each"
    )
    print(f"after {WARMUP_RUNS} warm-up runs each\n")
    print(format_table(timings))
    print()
    if differences:
        print("WARNING: the recipes differ, so the comparison is not like for like:")
        print("\n".join(f"  {d}" for d in differences))
    else:
        print("recipes: equivalent (stages, apt packages, pip pins and index, ENV, LABEL, ...)")
    print(
        f"builder --help: {len(imports)} modules imported; slowest: "
        + ", ".join(f"{i.name} {i.cumulative_us / 1000:.0f} ms" for i in slowest)
    )
    print(
        f"builder --help heavy imports ({', '.join(HEAVY_MODULES)}): "
        + (f"{', '.join(heavy)}: MISSED" if heavy else "none: OK")
    )
    print(
        f"the libraries alone (typer, yaml, jinja2): {timings[3].median:.0f} ms, "
        f"{timings[3].median / timings[1].median:.2f} of hpccm's whole run"
    )
    verdict = "OK" if ratio <= TARGET_RATIO else "MISSED"
    print(f"ratio builder/hpccm (median): {ratio:.2f} (target <= {TARGET_RATIO:.2f}): {verdict}")
    help_ms = timings[2].median
    verdict = "OK" if help_ms < HELP_TARGET_MS else "MISSED"
    print(f"builder --help (median): {help_ms:.0f} ms (target < {HELP_TARGET_MS:.0f}): {verdict}")
    tab_ms = timings[4].median
    verdict = "OK" if tab_ms < HELP_TARGET_MS else "MISSED"
    print(f"a tab press (median): {tab_ms:.0f} ms (target < {HELP_TARGET_MS:.0f}): {verdict}")
    k8s_ms = timings[5].median
    verdict = "OK" if k8s_ms < KUBERNETES_TARGET_MS else "MISSED"
    print(
        f"builder kubernetes, 64 nodes (median): {k8s_ms:.0f} ms "
        f"(target < {KUBERNETES_TARGET_MS:.0f}): {verdict}"
    )


def typer_version() -> str:
    """typer's version in the venv that runs builder (this script's own)."""
    from importlib.metadata import version

    return version("typer")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--runs", type=_positive, default=15, help="timed runs per command (default: 15)"
    )
    args = parser.parse_args(argv)
    try:
        measure(args.runs)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

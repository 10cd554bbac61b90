"""Shared fixtures: specs written to a temp folder, presets loaded once."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

MINIMAL = """\
name: demo
image:
  accelerator: cpu
  torch: "2.13.0"
  deepspeed: "0.19.8"
"""


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[[str], Path]:
    """Write YAML text (dedented) to tmp_path/stack.yaml and return its path."""

    def write(text: str, name: str = "stack.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return write


REQUIRE_REAL = os.environ.get("BUILDER_REQUIRE_REAL") == "1"
"""Set by .ci/run: every real tool and the Docker engine must be there; no skips."""


def unavailable(message: str) -> NoReturn:
    """The one place a test may find a real part missing: under BUILDER_REQUIRE_REAL=1
    (CI) that fails the test; elsewhere it skips, saying how to get the part."""
    if REQUIRE_REAL:
        pytest.fail(message)
    pytest.skip(message)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under BUILDER_REQUIRE_REAL=1 no test may skip, whatever skipped it."""
    outcome: Any = yield
    report = outcome.get_result()
    if REQUIRE_REAL and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = (
            f"skipped under BUILDER_REQUIRE_REAL=1, which forbids it: {report.longrepr}"
        )


def real_tool(name: str) -> str:
    """Path of a real external tool; scripts/ensure-tools.sh installs the suite's tools
    when one is missing (see unavailable when it still is)."""
    path = _installed(name)
    if path is None:
        problem = _ensure_tools()
        path = _installed(name)
        if path is None:
            unavailable(
                f"{name} is not installed, and scripts/ensure-tools.sh did not "
                f"install it: {problem or 'it does not know it'}"
            )
    return path


def _installed(name: str) -> str | None:
    sbin = Path("/usr/sbin") / name  # sshd lives here, often off a user's PATH
    return shutil.which(name) or (str(sbin) if sbin.exists() else None)


@functools.cache
def _ensure_tools() -> str | None:
    """Run scripts/ensure-tools.sh once: None when it succeeded, else why not."""
    return run_script("ensure-tools.sh")


def run_script(name: str, *args: str, env: dict[str, str] | None = None) -> str | None:
    """Run one of the repository's scripts/ (they make the engine, the base image, the
    wheelhouse and the test tools when missing, and do nothing when they are there):
    None when it succeeded, else the end of what it printed."""
    result = subprocess.run(
        [str(Path(__file__).parents[1] / "scripts" / name), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHON": sys.executable, **(env or {})},
        stdin=subprocess.DEVNULL,
    )
    if result.returncode == 0:
        return None
    return f"exit {result.returncode}: {(result.stdout + result.stderr).strip()[-1500:]}"


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C reaches what the tests start, as it reaches a terminal's foreground job. A
    shell that runs the suite in the background (`nohup ... &`, CI runners, a
    non-interactive `cmd &`) hands down an ignored SIGINT, every child would inherit it
    and a Ctrl-C test would prove nothing (or judge a run that was never interrupted).
    A handled signal is reset to its default by exec, so every process the tests start
    takes SIGINT as a user's does."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


INTEGRATION = Path(__file__).parent / "integration"
QUIET = "quiet_machine"
"""The fixture of the tests that wait for the shared images' builds to end."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/integration/ is an integration test, whether its module
    says so or not; they run after the tests that need no engine (each part in the order
    it came in, random included), while the shared images build
    (tests/integration/images.py). The tests that judge rates wait for every build to end
    (``quiet_machine``): they run last, so that the others run while the builds go on
    instead of waiting behind them. pytest-randomly shuffles before this runs."""
    for item in items:
        if item.path.is_relative_to(INTEGRATION):
            item.add_marker(pytest.mark.integration)
    items.sort(
        key=lambda item: (
            item.get_closest_marker("integration") is not None,
            QUIET in getattr(item, "fixturenames", ()),
        )
    )


@dataclass
class Span:
    """The wall time of one kind of test: first start to last end."""

    start: float
    end: float = 0.0
    tests: int = 0


SPANS: dict[str, Span] = {}


def _kind(nodeid: str) -> str:
    return "integration" if nodeid.startswith("tests/integration/") else "engine-free"


def pytest_runtest_logstart(nodeid: str) -> None:
    SPANS.setdefault(_kind(nodeid), Span(time.monotonic())).tests += 1


def pytest_runtest_logfinish(nodeid: str) -> None:
    SPANS[_kind(nodeid)].end = time.monotonic()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Each kind's wall time (the shared images build during the engine-free span)."""
    if SPANS:
        terminalreporter.section("wall time by kind")
        for kind, span in sorted(SPANS.items()):
            terminalreporter.write_line(
                f"{kind}: {span.tests} tests, {span.end - span.start:.0f} s"
            )

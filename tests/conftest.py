"""Shared fixtures: specs written to a temp folder, presets loaded once."""

from __future__ import annotations

import os
import shutil
import signal
import textwrap
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
    """Path of a real external tool (see unavailable when it is missing)."""
    sbin = Path("/usr/sbin") / name  # sshd lives here, often off a user's PATH
    path = shutil.which(name) or (str(sbin) if sbin.exists() else None)
    if path is None:
        unavailable(f"{name} is not installed (scripts/ensure-tools.sh installs it)")
    return path


def ctrl_c_reaches_it() -> None:
    """A preexec_fn: the child takes SIGINT as a terminal's foreground job does. A shell
    that runs the suite in the background (`nohup ... &`, some CI runners) hands down
    an ignored SIGINT, Python keeps it ignored, and a Ctrl-C test would prove nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

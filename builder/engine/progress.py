"""How a build shows its progress: a live panel on a terminal, plain lines in CI logs.

The live view holds the current step (N/M), its instruction, elapsed time and
the last log lines; the plain view prints every step and log line once, with
timings, which is what CI logs and pipes want.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from typing import TYPE_CHECKING, Literal, TextIO

if TYPE_CHECKING:
    from rich.live import Live
    from rich.panel import Panel

    from builder.engine.build import BuildResult, Progress

Mode = Literal["auto", "tty", "plain", "quiet"]
LIVE_LINES = 8
SHOWN_SECONDS = 1.0
"""Plain output times only steps that took at least this long (metadata steps take ~0.1 s)."""


def progress_for(mode: Mode, stream: TextIO | None = None) -> Progress:
    """The progress display for mode; auto picks the live view on a terminal."""
    out = stream or sys.stderr
    if mode == "auto":
        mode = "tty" if out.isatty() else "plain"
    if mode == "tty":
        return LiveProgress(out)
    if mode == "quiet":
        return PlainProgress(out, logs=False)
    return PlainProgress(out)


class PlainProgress:
    """One line per step and per log line; timings when a step ends."""

    def __init__(self, out: TextIO, *, logs: bool = True) -> None:
        self._out, self._logs = out, logs
        self._started = time.monotonic()
        self._step_started: float | None = None

    def _end_step(self) -> None:
        if self._step_started is not None and self._logs:
            seconds = time.monotonic() - self._step_started
            if seconds >= SHOWN_SECONDS:
                self._print(f"    ({seconds:.1f}s)")
        self._step_started = None

    def step(self, number: int, total: int, instruction: str) -> None:
        self._end_step()
        self._step_started = time.monotonic()
        self._print(f"[{number}/{total}] {instruction}")

    def cached(self) -> None:
        if self._logs:
            self._print("    cached")

    def line(self, text: str) -> None:
        if self._logs:
            self._print(f"    | {text}")

    def finish(self, result: BuildResult | None) -> None:
        self._end_step()
        if result is not None:
            self._print(
                f"built {result.reference} ({result.image_id[7:19]}) in {result.seconds:.1f}s, "
                f"{result.cached_steps}/{len(result.cacheable_steps)} steps from cache"
            )

    def _print(self, text: str) -> None:
        print(text, file=self._out, flush=True)


class LiveProgress:
    """A live panel: step N/M, instruction, elapsed time, the last log lines."""

    def __init__(self, out: TextIO) -> None:
        from rich.console import Console

        self._console = Console(file=out)
        self._live: Live | None = None
        self._lines: deque[str] = deque(maxlen=LIVE_LINES)
        self._title = "starting the build"
        self._started = time.monotonic()
        self._step_started = time.monotonic()
        self._cached = False

    def _render(self) -> Panel:
        from rich.panel import Panel
        from rich.text import Text

        now = time.monotonic()
        state = "cached" if self._cached else f"{now - self._step_started:5.1f}s"
        body = Text("\n".join(self._lines) or " ", style="dim", no_wrap=True, overflow="ellipsis")
        return Panel(
            body,
            title=Text(self._title, no_wrap=True, overflow="ellipsis"),
            subtitle=f"{state} in step, {now - self._started:.0f}s in all",
            title_align="left",
        )

    def _refresh(self) -> None:
        if self._live is None:
            from rich.live import Live

            self._live = Live(
                get_renderable=self._render, console=self._console, refresh_per_second=4
            )
            self._live.start()
        self._live.refresh()

    def step(self, number: int, total: int, instruction: str) -> None:
        self._title = f"[{number}/{total}] {instruction}"
        self._step_started, self._cached = time.monotonic(), False
        self._lines.clear()
        self._refresh()

    def cached(self) -> None:
        self._cached = True
        self._refresh()

    def line(self, text: str) -> None:
        self._lines.append(text)
        self._refresh()

    def finish(self, result: BuildResult | None) -> None:
        if self._live is not None:
            self._live.stop()
        if result is not None:
            self._console.print(
                f"built {result.reference} ({result.image_id[7:19]}) in {result.seconds:.1f}s, "
                f"{result.cached_steps}/{len(result.cacheable_steps)} steps from cache"
            )

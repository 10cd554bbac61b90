"""What the preflight probe is told, and what its reports are judged against.

The probe runs as the plan's script with its settings as arguments (so `builder
preflight --dry-run` shows the exact launcher line), on the platform's device
and collective backend, or on a rehearsal's stand-in for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.errors import UsageError
from builder.preflight.report import Expected

if TYPE_CHECKING:
    from builder.platforms.base import Platform

PROBE = "preflight.py"
FILES = (PROBE, "preflight_devices.py", "collect.py")
"""The payload scripts the probe needs on the nodes (collect.py: the fingerprint)."""
BUDGET = 60.0
QUICK_BUDGET = 6.0
MIN_BUDGET = 3.0
"""Below this the probe cannot take one pass of each measurement."""
THRESHOLD = 0.25
"""A node whose matmul, memory copy or link is more than this below the median of the
other nodes is named as a straggler."""
START_ALLOWANCE = 120.0
"""Seconds the launcher, the rendezvous and the collective library's start may take
on top of the budget before the job counts as hung."""
PEER_TIMEOUT = 60.0
"""How long a rank waits for its peers (rendezvous, one collective), beyond the budget,
before it reports the error itself: within the job's time, so the ranks that did
start say so."""


@dataclass(frozen=True)
class Settings:
    """--quick, --budget and --threshold, checked."""

    quick: bool = False
    budget: float | None = None
    threshold: float = THRESHOLD

    def __post_init__(self) -> None:
        if self.budget is not None and not (
            math.isfinite(self.budget) and self.budget >= MIN_BUDGET
        ):
            raise UsageError(
                f"--budget {self.budget:g}: the probe needs at least {MIN_BUDGET:g} s for one "
                f"pass of each measurement; give {MIN_BUDGET:g} or more (default: "
                f"{BUDGET:g}, {QUICK_BUDGET:g} with --quick)"
            )
        if not (math.isfinite(self.threshold) and 0 < self.threshold < 1):
            raise UsageError(
                f"--threshold {self.threshold:g}: give the fraction below the other nodes' "
                f"median that names a straggler, above 0 and below 1 (default {THRESHOLD:g})"
            )

    @property
    def seconds(self) -> float:
        """The measurements' budget."""
        if self.budget is not None:
            return self.budget
        return QUICK_BUDGET if self.quick else BUDGET

    @property
    def timeout(self) -> float:
        """How long the whole job may take."""
        return self.seconds + START_ALLOWANCE

    def as_data(self) -> dict[str, object]:
        return {"quick": self.quick, "budget": self.seconds, "threshold": self.threshold}


def probe_args(
    platform: Platform, slots: int, settings: Settings, threads: int | None = None
) -> tuple[str, ...]:
    """The probe's arguments for a run on platform (threads: CPU threads per rank, where
    nodes share a machine's cores; else each node's cores over its ranks)."""
    args: tuple[str, ...] = (
        "--device",
        platform.torch_device,
        "--backend",
        platform.collective.torch_backend,
        "--slots",
        str(slots),
        "--budget",
        f"{settings.seconds:g}",
        "--timeout",
        f"{PEER_TIMEOUT + settings.seconds:g}",
    )
    if threads is not None:
        args += ("--threads", str(threads))
    return (*args, "--quick") if settings.quick else args


def expected_of(
    platform: Platform,
    nodes: tuple[str, ...],
    slots: int,
    *,
    fabric: str,
    env: dict[str, str],
    settings: Settings,
) -> Expected:
    """What the probe's reports should show for a run on platform with the run's
    environment (env: NCCL_NET is the transport NCCL must use)."""
    library = platform.collective
    net = env.get(library.net_variable) if library.net_variable else None
    return Expected(
        nodes=nodes,
        slots=slots,
        device_word=platform.device_word,
        library=library,
        net=net,
        fabric=fabric,
        threshold=settings.threshold,
        mnnvl=bool(platform.mnnvl_env) and set(platform.mnnvl_env or ()) <= set(env.items()),
    )

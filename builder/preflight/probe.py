"""What the preflight probe is told, and what its reports are judged against.

The probe runs as the plan's script with its settings as arguments (so `builder
preflight --dry-run` shows the exact launcher line), on the platform's device
and collective backend, or on a rehearsal's stand-in for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from builder.errors import UsageError
from builder.preflight.report import Expected
from builder.spec.records import Mount

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from builder.engine.base import Engine
    from builder.platforms.base import Platform
    from builder.resolved import Resolved

PROBE = "preflight.py"
FILES = (PROBE, "preflight_devices.py", "collect.py")
"""The payload scripts the probe needs on the nodes (collect.py: the fingerprint)."""
FOLDER = "preflight"
"""The probe's folder in the cluster folder: its scripts and its launch.sh."""
MOUNT = "/etc/builder/preflight"
"""Where the probe's folder is bound in a container: beside the cluster folder's bind,
away from the code folder's (image.workdir)."""
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

    def judged_words(self) -> str:
        """What `builder preflight --from-log` must be given to judge as these settings
        would (the threshold; the budget only shaped the run)."""
        return "" if self.threshold == THRESHOLD else f" --threshold {self.threshold:g}"


@dataclass(frozen=True)
class ProbeRequest:
    """What `builder preflight` was asked, as each site's preflight reads it
    (``Scheduler.check_probe``, ``probe_expected``, ``preflight``)."""

    settings: Settings = Settings()
    image: str = ""
    """The image reference the probe runs (the run's)."""
    dry_run: bool = False
    """Write or print the probe's job (or plan); run nothing."""
    rehearse: bool = False
    from_log: bool = False
    """A saved output of the probe is judged; nothing runs or is written."""
    output: Path | None = None
    """Where --dry-run writes the probe's job (a folder or a file, as the site writes)."""
    force: bool = False
    job: str | None = None
    """The Kubernetes job kind (--job)."""
    cluster_dir: Path | None = None
    """The ssh nodes' cluster folder (--cluster-dir)."""
    node_dir: str | None = None
    """Where the nodes see the run's folder (--node-dir), when not at this machine's path."""
    ssh_config: Path | None = None
    """The ssh client config that reaches the nodes (--ssh-config)."""
    spec_ref: str = "stack.yaml"
    """How a written README names the spec."""
    engine: Callable[[], Engine] | None = None
    """Reaches the engine here, which may hold the image (ssh: the architectures it was
    built for, checked against the nodes' before anything starts)."""


@dataclass(frozen=True)
class ProbeOutput:
    """What a site's preflight gave back when it ran nothing to judge: the files of the
    probe's job it wrote, or a text to print (a plan, manifests) with its data for --json."""

    written: tuple[Path, ...] = ()
    text: str | None = None
    data: object = None
    next: tuple[str, ...] = ()
    """The commands from the written job to its judged table (``next:``)."""


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
        "--transport",
        platform.collective.transport,
        *platform.probe_sizes.args(),
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


def preflight_stack(resolved: Resolved, cluster_dir: str, settings: Settings) -> Resolved:
    """The resolved stack's run with the probe as its script (see the module's doc)."""
    launch = resolved.spec.launch
    folder = f"{cluster_dir.rstrip('/')}/{FOLDER}"
    if resolved.runtime.isolated:
        mounts = (*launch.mounts, Mount(folder, MOUNT, read_only=True))
        return probe_stack(resolved, settings, mounts=mounts)
    return probe_stack(resolved, settings, script=f"{folder}/{PROBE}")


def probe_stack(
    resolved: Resolved,
    settings: Settings,
    *,
    script: str | None = None,
    mounts: tuple[Mount, ...] | None = None,
) -> Resolved:
    """The run named NAME-preflight with the probe as its script and the probe's arguments:
    script is where the nodes read it; None: the probe's folder is at MOUNT in the
    container (a bind, a ConfigMap). Everything else is the run's."""
    spec = resolved.spec
    launch = spec.launch
    if launch.uneven:
        raise UsageError(
            "launch.node_slots: preflight judges every node against the same number of ranks; "
            "nodes of different sizes are not judged yet: run it on the nodes of one size "
            "(a spec with those nodes and their slots), then on the others",
            field="launch.node_slots",
        )
    if script is None:
        workdir = spec.image.workdir.rstrip("/") + "/"
        if launch.code and f"{MOUNT}/".startswith(workdir):
            raise UsageError(
                f"image.workdir {spec.image.workdir} holds {MOUNT}, where preflight mounts its "
                "probe, and launch.code is mounted there: choose a workdir such as /workspace"
            )
        script = f"{MOUNT}/{PROBE}"
    args = probe_args(resolved.platform, launch.slots, settings)
    probe = replace(
        launch, script=script, args=args, mounts=launch.mounts if mounts is None else mounts
    )
    return resolved.with_spec(replace(spec, name=f"{spec.name}-preflight", launch=probe))

"""Preflight on a rehearsal's containers: the same probe, judged the same way, on
node1..nodeN of this machine (over gloo on the platform's stand-in). It is how
preflight is tested without a cluster, and how a site tries the probe first.

``RehearsedPreflight`` runs in phases (``up``, then ``job``), so a caller can
act on the nodes in between (slow one down, change its packages).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

from builder import platforms
from builder.errors import Interrupted, NotInEngine
from builder.fabrics import NONE
from builder.payload import payload_path
from builder.preflight.probe import PROBE, expected_of, probe_args
from builder.preflight.report import Finding, Preflight, judge
from builder.rehearse.run import Rehearsal

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from builder.engine.base import Engine
    from builder.preflight.probe import Settings
    from builder.rehearse.session import Node
    from builder.resolved import Resolved


class RehearsedPreflight:
    """The probe as the script of a rehearsal of spec; torn down on close (unless keep)."""

    def __init__(
        self,
        resolved: Resolved,
        *,
        image: str,
        engine: Engine,
        nodes: int,
        settings: Settings,
        keep: bool = False,
        say: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.spec = resolved.spec
        self.settings = settings
        self.stand_in = platforms.stand_in_of(resolved.platform)
        self.rehearsal = Rehearsal(
            resolved,
            image=image,
            engine=engine,
            nodes=nodes,
            script=str(payload_path(PROBE)),
            # the nodes share this machine's cores: one thread per rank, no oversubscription
            args=probe_args(self.stand_in, resolved.spec.launch.slots, settings, threads=1),
            timeout=settings.timeout,
            keep=keep,
            say=say,
        )

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.rehearsal.session.nodes

    def up(self) -> None:
        self.rehearsal.up()

    def job(self) -> Preflight:
        outcome = self.rehearsal.job()
        workload = self.rehearsal.workload.resolved
        expected = expected_of(
            self.stand_in,
            outcome.nodes,
            workload.spec.launch.slots,
            fabric=NONE,  # a rehearsal's containers get no fabric
            env=workload.run_environment(),
            settings=self.settings,
        )
        cores = os.cpu_count() or 1
        if expected.world > cores:
            expected = replace(expected, rates_judged=False)
        launch = [Finding(f.node, f.what, "fail", f.log_tail) for f in outcome.faults]
        result = judge(outcome.output, expected, launch)
        if not expected.rates_judged:
            result.findings.append(
                Finding(
                    None,
                    f"the rehearsal's {expected.world} ranks share this machine's {cores} "
                    "cores: matmul, memory and link figures vary by scheduling and are not "
                    "judged (fewer nodes or launch.slots make them count)",
                    "warn",
                )
            )
        result.settings = {**self.settings.as_data(), "where": "rehearsal"}
        result.phases = outcome.phases  # teardown's time comes with close()
        return result

    def close(self) -> None:
        self.rehearsal.close()

    def __enter__(self) -> RehearsedPreflight:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def rehearsed_preflight(
    resolved: Resolved,
    *,
    image: str,
    engine: Engine,
    nodes: int,
    settings: Settings,
    say: Callable[[str], None] = lambda _: None,
) -> Preflight:
    """Preflight on nodes rehearsal containers of image; always torn down."""
    if not engine.exists(image):
        raise NotInEngine(
            f"image {image} is not in the local engine: build it with `builder build` first",
            image=image,
        )
    try:
        with RehearsedPreflight(
            resolved, image=image, engine=engine, nodes=nodes, settings=settings, say=say
        ) as run:
            run.up()
            return run.job()
    except KeyboardInterrupt:
        raise Interrupted(
            "preflight interrupted; its containers and network were removed"
        ) from None

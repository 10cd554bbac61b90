"""Preflight on Kubernetes: the probe as the run's own TrainJob (or PyTorchJob), written
for kubectl, and the pods' logs judged here.

The probe's manifests are the Kubernetes scheduler's for the probe's stack
(``probe_stack``: the run named NAME-preflight, the probe as its script): the same
image, runtime, launcher, resources, volumes (the run's claims), node selector and
environment. The
probe's scripts reach the pods in one more ConfigMap, ``NAME-preflight-preflight``,
mounted read-only at /etc/builder/preflight (where the other runtimes bind them), so
the launcher starts the probe instead of launch.script. builder runs no kubectl: the
user applies the files and saves the pods' logs; ``judge_log`` (report.py) reads the
probe's ``BUILDER_PREFLIGHT`` lines from them, as ``builder preflight`` reads a launch's
output, against the pods as the hostfile names them (``kubernetes_expected``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from builder.payload import payload_text
from builder.preflight.probe import FILES, FOLDER, MOUNT, expected_of, probe_stack
from builder.schedulers.kubernetes.manifests import (
    STORAGE,
    PodFiles,
    job_kind,
    kubernetes_text,
    pod_hosts,
    watch_of,
    write_kubernetes,
)
from builder.schedulers.kubernetes.section import Kubernetes

PULL_ALLOWANCE = 20 * 60.0
"""Seconds for the probe's pods to be placed and pull the run's image, beyond the
probe's own time (a multi-GB CUDA image on a cold node)."""
LOG_REQUESTS = 5
"""kubectl logs' own --max-log-requests: a selector over more pods needs it raised."""

if TYPE_CHECKING:
    from pathlib import Path

    from builder.preflight.probe import Settings
    from builder.preflight.report import Expected
    from builder.resolved import Resolved


def probe_files() -> PodFiles:
    """The probe's scripts, for every pod at MOUNT."""
    return PodFiles(FOLDER, MOUNT, tuple((name, payload_text(name)) for name in FILES))


def kubernetes_probe(resolved: Resolved, settings: Settings) -> Resolved:
    """The run with the probe as its script, read from the probe's ConfigMap, on the run's
    own claims for launch.code and launch.cache (the site's, or the run's NAME-code and
    NAME-cache): the probe writes none of its own."""
    spec = resolved.spec
    k8s = spec.launch.section(Kubernetes)
    claims = replace(
        k8s,
        code_claim=k8s.code_claim or (f"{spec.name}-code" if spec.launch.code else None),
        cache_claim=k8s.cache_claim or (f"{spec.name}-cache" if spec.launch.cache else None),
    )
    run = resolved.with_spec(replace(spec, launch=spec.launch.with_section(claims)))
    return probe_stack(run, settings)


def preflight_manifests_text(
    resolved: Resolved, *, image: str, settings: Settings, job: str | None = None
) -> str:
    """The probe's manifests as kubectl reads them (refused, as the run's are, where the
    run needs a Secret: those go only in a 0600 file, ``write_preflight_manifests``)."""
    probe = kubernetes_probe(resolved, settings)
    return kubernetes_text(probe, image=image, job=job, files=probe_files())


def write_preflight_manifests(
    resolved: Resolved,
    output: Path,
    *,
    image: str,
    settings: Settings,
    job: str | None = None,
    force: bool = False,
) -> list[Path]:
    """The probe's manifests at output and its Secrets (0600) beside it, as
    ``write_kubernetes`` writes the run's."""
    probe = kubernetes_probe(resolved, settings)
    return write_kubernetes(probe, output, image=image, job=job, force=force, files=probe_files())


def kubernetes_expected(resolved: Resolved, settings: Settings, job: str | None = None) -> Expected:
    """What the probe's reports should show, on the probe's pods in the hostfile's order."""
    probe = kubernetes_probe(resolved, settings)
    return expected_of(
        resolved.platform,
        tuple(pod_hosts(probe, job_kind(probe, job))),
        resolved.spec.launch.slots,
        fabric=resolved.fabric.name,
        env=resolved.run_environment(),
        settings=settings,
    )


def probe_commands(
    resolved: Resolved, files: str, settings: Settings, job: str | None, spec_ref: str
) -> tuple[str, ...]:
    """The probe's job applied (files: kubectl's -f options), waited for (its own time,
    and PULL_ALLOWANCE for the pods to be placed and pull the image), its pods' logs
    gathered and judged, then deleted: what ``next:`` gives, as the how-to's steps. The
    run's own claims, which the probe mounts, are said first: only the run's manifests
    make them."""
    watch = watch_of(kubernetes_probe(resolved, settings), job)
    ns, judged = watch.ns, " --job " + job if job else ""
    k8s = resolved.spec.launch.section(Kubernetes)
    owned = (resolved.spec.launch.code and not k8s.code_claim) or (
        resolved.spec.launch.cache and not k8s.cache_claim
    )
    claims = (
        (
            "# the run's claims first, unless they exist: builder kubernetes "
            f"{spec_ref} -o RUN.yaml; kubectl apply -f RUN.yaml -l "
            f"{','.join(f'{k}={v}' for k, v in STORAGE.items())}",
        )
        if owned
        else ()
    )
    minutes = math.ceil((settings.timeout + PULL_ALLOWANCE) / 60)
    return (
        *claims,
        f"kubectl apply {files}",
        f"kubectl wait{ns} --for=condition={watch.done} {watch.resource} --timeout={minutes}m",
        f"kubectl logs{ns} -l {watch.selector} --prefix --tail=-1 "
        f"--max-log-requests={max(LOG_REQUESTS, watch.pods)} > preflight.log",
        f"builder preflight {spec_ref} --scheduler kubernetes --from-log preflight.log"
        + judged
        + settings.judged_words(),
        f"kubectl delete {files}",
    )

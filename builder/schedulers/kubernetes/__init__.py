"""The Kubernetes scheduler: Kubeflow Trainer TrainJob (or PyTorchJob) manifests that
kubectl applies (``manifests``); its options, launch.kubernetes (``section``); its
preflight, the probe as the run's own job, written for kubectl (``preflight``)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from builder.errors import UsageError
from builder.image.reference import on_docker_hub_by_default
from builder.preflight.probe import ProbeOutput
from builder.schedulers.base import Scheduler, check_job_probe
from builder.schedulers.kubernetes.manifests import (
    MANIFEST,
    POD_RUNTIME,
    SECRETS_SUFFIX,
    manifest_files,
)
from builder.schedulers.kubernetes.preflight import (
    kubernetes_expected,
    preflight_manifests_text,
    probe_commands,
    write_preflight_manifests,
)
from builder.schedulers.kubernetes.section import Kubernetes

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from builder.cluster.folder import RunFolder
    from builder.output import OutputFile
    from builder.preflight.probe import ProbeRequest
    from builder.preflight.report import Expected, Preflight
    from builder.resolved import Resolved
    from builder.spec.records import LaunchSpec


class KubernetesScheduler(Scheduler):
    """Kubeflow Trainer TrainJob (or PyTorchJob) manifests: kubectl starts the run."""

    name = "kubernetes"
    started = "`kubectl apply -f kubernetes.secrets.yaml -f kubernetes.yaml`"
    stopped = "`kubectl delete trainjob NAME` (or pytorchjob): the job's pods on every node"
    section = Kubernetes
    probe_writes = "file"
    nodes_read_folder = False  # kubectl applies it from here; the pods get Secrets
    environment_files = (MANIFEST,)

    def runtime_of(self, launch: LaunchSpec) -> str:  # noqa: ARG002 - a pod is a container
        return POD_RUNTIME.name

    def materialize(
        self,
        resolved: Resolved,
        *,
        image: str,
        folder: RunFolder,
        force: bool = False,
        spec_ref: str = "stack.yaml",
    ) -> list[OutputFile]:
        """The manifests, the Secrets they read (0600) and a README with the commands
        from here to the run; the cluster host key of an earlier secrets file in the
        folder is kept unless force (the pods' known_hosts pin it)."""
        return manifest_files(
            resolved, image=image, cluster_dir=folder.here, force=force, spec_ref=spec_ref
        )

    def image_warnings(self, image: str) -> tuple[str, ...]:
        if not on_docker_hub_by_default(image):
            return ()
        return (
            f"image {image} names no registry: every node's kubelet pulls it from Docker "
            "Hub under that name, never from this machine's engine; push it to a registry "
            "the nodes reach (image.name REGISTRY/NAME, then `builder push`) or give "
            "--image REGISTRY/NAME:TAG",
        )

    def start_commands(
        self,
        resolved: Resolved,  # noqa: ARG002 - the files say it all
        written: Sequence[Path],
        nodes: str | None,  # noqa: ARG002 - the nodes never read the folder
    ) -> tuple[str, ...]:
        """kubectl apply of the Secrets first (when written), then the manifests."""
        files = _kubectl_files(written)
        return (f"kubectl apply {files}",) if files else ()

    def check_probe(self, request: ProbeRequest) -> None:
        """builder runs no kubectl: the probe's manifests are written (--dry-run)."""
        check_job_probe(self, request)
        if not request.from_log and not request.dry_run:
            raise UsageError(
                "builder runs no kubectl: --scheduler kubernetes --dry-run [-o FILE] writes the "
                "probe's TrainJob; apply it with kubectl, save its pods' logs, and judge them "
                "with --scheduler kubernetes --from-log FILE",
                field="--dry-run",
            )

    def probe_expected(self, resolved: Resolved, request: ProbeRequest) -> Expected:
        return kubernetes_expected(resolved, request.settings, request.job)

    def preflight(
        self,
        resolved: Resolved,
        request: ProbeRequest,
        *,
        say: Callable[[str], None],  # noqa: ARG002 - writing the manifests says nothing more
    ) -> Preflight | ProbeOutput:
        """The probe's manifests: printed (no -o, or -o -), or written with their Secrets
        (0600) beside them."""
        output = request.output
        if output is None or str(output) == "-":
            text = preflight_manifests_text(
                resolved, image=request.image, settings=request.settings, job=request.job
            )
            return ProbeOutput(text=text)
        written = write_preflight_manifests(
            resolved,
            output,
            image=request.image,
            settings=request.settings,
            job=request.job,
            force=request.force,
        )
        files = _kubectl_files(written)
        if not files:
            return ProbeOutput(written=tuple(written))
        after = probe_commands(resolved, files, request.settings, request.job, request.spec_ref)
        return ProbeOutput(written=tuple(written), next=after)


def _kubectl_files(written: Sequence[Path]) -> str:
    """kubectl's -f options for the files written: the Secrets first, then the manifests
    that read them; nothing when no manifest was written."""
    yaml = [path for path in written if path.suffix in {".yaml", ".yml"}]
    secrets = [path for path in yaml if path.name.endswith(SECRETS_SUFFIX)]
    manifests = [path for path in yaml if path not in secrets]
    if not manifests:
        return ""
    return " ".join(f"-f {shlex.quote(str(path))}" for path in (*secrets, *manifests))


SCHEDULER = KubernetesScheduler()

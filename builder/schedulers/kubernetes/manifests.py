"""The Kubernetes scheduler, `builder kubernetes`: the run as a Kubeflow Trainer v2
TrainJob (with the TrainingRuntime it needs) or a Training Operator PyTorchJob.

The launcher's argv and environment are the plan's (``launch.plan.prepare``) for a
container of the image, as docker's runtime plans it: the cluster folder at
/etc/builder/cluster, the code at image.workdir, the cache (and checkpoints, logs,
mounts) at their own paths, the run's variables (NCCL_*, the fabric's, the cache's)
in the container's environment. A pod's container is that container: nothing here
knows a launcher's flags.

Read from kubeflow/trainer v2.3.0 (658725bdae5c7e3a0854d93ac6ff492e109a22ab; the MPI
plugin is unchanged at 8c0f5059bd51ec3ba6d6a6a7b2e1471de7bc13b3 but for two lines):
pkg/runtime/framework/plugins/mpi/mpi.go, pkg/runtime/framework/plugins/jobset,
pkg/constants/constants.go, manifests/base/runtimes/deepspeed_distributed.yaml and
pkg/apis/trainer/v1alpha1.

- torchrun: mlPolicy torch, one replicated job ``node``; every pod runs the same
  torchrun (c10d rendezvous at the first pod, ``NAME-node-0-0.NAME``, the JobSet's
  pod hostname and subdomain).
- deepspeed, gaudi_spawn, mpirun: mlPolicy mpi (OpenMPI, runLauncherAsNode, as the
  Trainer's deepspeed-distributed runtime): ``node`` pods run the image's sshd on
  image.ssh.port (readiness: that port), the ``launcher`` pod, once they are ready,
  starts its own sshd (BUILDER_SSHD=1) and the launcher with builder's hostfile and
  .deepspeed_env. The MPI plugin makes a login key per TrainJob, the Secret
  ``NAME-mpi-ssh-auth`` (ssh-privatekey, ssh-publickey), and mounts it at
  sshAuthMountPath; it makes no host key. Mounted over ~/.ssh its files are root's
  in a world-writable folder, which sshd's StrictModes refuses; so sshAuthMountPath is
  a folder builder does not read, and the same Secret is projected into the cluster
  folder as id_ed25519, id_ed25519.pub and authorized_keys, next to builder's hostfile,
  .deepspeed_env and node_ssh_config (a ConfigMap) and the cluster host key and
  ssh_known_hosts (builder's Secret ``NAME-ssh-host``): the image's entrypoint installs
  them as it does a bundle's, so every node's sshd shows the pinned host key.
- pytorchjob: Master and Worker replicas, container ``pytorch``, the same torchrun
  with its rendezvous at ``NAME-master-0`` (the operator's service). No elasticPolicy:
  torchrun's own --nnodes MIN:MAX and --max-restarts (from the plan) say it.

Secret launch.env values (``launch.secrets``) are in no manifest: a Secret
``NAME-env`` in the separate 0600 secrets file, read with envFrom; a secret value
found in the manifests anyway (in launch.args, say) is refused.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder import schedulers
from builder.cluster.dsenv import dsenv_for
from builder.cluster.folder import write_cluster_files
from builder.cluster.hostfile import Host, hostfile_text, hosts_from_nodes
from builder.cluster.keys import (
    AUTHORIZED,
    HOST_PRIVATE,
    KNOWN_HOSTS,
    NODE_SSH_CONFIG,
    PRIVATE,
    PUBLIC,
    host_key_files,
    known_hosts_text,
    node_ssh_config,
)
from builder.contract import CLUSTER_DIR, DSENV, HOSTFILE
from builder.errors import Problem, SpecError, UsageError
from builder.launch.plan import Placement, check_pair, prepare
from builder.launch.runtimes import docker
from builder.launch.secrets import SECRET_MODE, secret_env
from builder.output import OutputFile
from builder.schedulers.base import image_commands
from builder.schedulers.kubernetes.section import DNS_1035, KUBERNETES_JOBS, Kubernetes

if TYPE_CHECKING:
    from builder.resolved import Resolved

Manifest = dict[str, Any]

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINING_API = "kubeflow.org/v1"
FRAMEWORK = f"{TRAINER_GROUP}/framework"
TRAINJOB, PYTORCHJOB = KUBERNETES_JOBS
NODE = "node"
"""The Trainer's replicated job and container of the trainer nodes (constants.Node)."""
LAUNCHER = "launcher"
"""The MPI runtime's launcher job (constants.Launcher); its container is still ``node``."""
ANCESTOR = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
"""The label that makes a replicated job the one the TrainJob's trainer fields reach."""
PYTORCH = "pytorch"
"""The Training Operator's container name in a PyTorchJob."""
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
POD_INTERFACES = ("eth0", "lo")
"""What every pod has of its own (the cluster network's veth, loopback)."""
MULTUS = "k8s.v1.cni.cncf.io/networks"
"""The pod annotation Multus reads: the secondary networks a pod joins."""
MANAGED = {"app.kubernetes.io/managed-by": "builder"}
STORAGE = {"app.kubernetes.io/component": "storage"}
"""The claims' label: ``kubectl apply -f FILE -l app.kubernetes.io/component=storage`` makes
only them (before a preflight, which mounts the run's claims)."""
TRAINER_SSH = "/etc/builder/trainer-ssh"
"""sshAuthMountPath: where the MPI plugin mounts its key Secret, read by nothing (the
same Secret is projected into the cluster folder, see the module's docstring)."""
SHM = "/dev/shm"
POD_RUNTIME = docker.RUNTIME
"""A pod's container is what docker's runtime plans: the image with the cluster folder,
the code, the cache at their paths, the environment inherited by ssh sessions."""
NAME = "kubernetes"
"""The scheduler this package is (its module's name)."""
MANIFEST = "kubernetes.yaml"
SECRETS = "kubernetes.secrets.yaml"
README = "README.md"
MAX_SECRETS_FILE = 1024 * 1024
_LONGEST_POD = f"-{LAUNCHER}-0-0"
"""The longest suffix the JobSet adds to the job's name for a pod's hostname (a label)."""


@dataclass(frozen=True)
class PodFiles:
    """Files every pod of the run reads at one folder, read-only, from a ConfigMap
    ``NAME-<name>``: what the run's script needs beside the image (the preflight probe's
    scripts, ``builder preflight --scheduler kubernetes``)."""

    name: str
    """The ConfigMap's suffix and the pods' volume name (a DNS-1123 label)."""
    path: str
    """Where the pods see the files."""
    files: tuple[tuple[str, str], ...]
    """(file name, text): each a ConfigMap key."""


def manifest_files(
    resolved: Resolved, *, image: str, cluster_dir: Path, force: bool, spec_ref: str
) -> list[OutputFile]:
    """The manifests, the Secrets they read (0600) and a README with the commands from
    here to the run (``Scheduler.materialize``); the cluster host key of an earlier secrets
    file in the folder is kept unless force (the pods' known_hosts pin it)."""
    objects = kubernetes_manifests(resolved, image=image)
    files = [
        OutputFile(MANIFEST, 0o644, manifests_yaml(objects)),
        OutputFile(README, 0o644, _readme(resolved, image, spec_ref)),
    ]
    earlier = cluster_dir / SECRETS
    kept = None
    if not force and earlier.is_file() and earlier.stat().st_size <= MAX_SECRETS_FILE:
        kept = kept_host_key(earlier.read_text(errors="replace"), resolved.spec.name)
    secrets = kubernetes_secrets(resolved, host_key=kept)
    if secrets:
        files.append(OutputFile(SECRETS, SECRET_MODE, manifests_yaml(secrets)))
    return files


def job_kind(resolved: Resolved, job: str | None = None) -> str:
    """The job kind of the run (job, else launch.kubernetes.job), checked against the
    launcher: a PyTorchJob runs torchrun only, and srun only a Slurm job runs."""
    launch, launcher = resolved.spec.launch, resolved.launcher
    kind = job or launch.section(Kubernetes).job
    where = "launch.kubernetes.job" if job is None else "--job"
    problems = []
    if kind not in KUBERNETES_JOBS:
        problems.append(Problem(where, f"{kind!r}: choose {' or '.join(KUBERNETES_JOBS)}"))
    elif launcher.batch_only:
        problems.append(
            Problem(
                "launch.launcher",
                f"{launcher.name} starts its ranks only as a Slurm job's tasks: use torchrun "
                "(a torch TrainJob or a PyTorchJob) or deepspeed/mpirun (an MPI TrainJob)",
            )
        )
    elif kind == PYTORCHJOB and launcher.over_ssh:
        problems.append(
            Problem(
                where,
                f"a PyTorchJob runs torchrun on every pod; launcher {launcher.name} reaches "
                "the nodes over ssh: use trainjob (the Trainer's MPI runtime) or torchrun",
            )
        )
    elif kind == PYTORCHJOB and launch.section(Kubernetes).runtime:
        problems.append(
            Problem(
                "launch.kubernetes.runtime",
                "names a Trainer ClusterTrainingRuntime, which a PyTorchJob does not use",
            )
        )
    name = resolved.spec.name
    if not re.fullmatch(DNS_1035, name) or len(name) + len(_LONGEST_POD) > 63:
        problems.append(
            Problem(
                "name",
                f"{name!r}: the job, its Service and its pods are named after it: a Service "
                "name is a DNS-1035 label (a-z first, then a-z, 0-9 and '-', not '-' last) and "
                f"a pod's hostname (NAME{_LONGEST_POD}) at most 63 characters: give a name "
                f"such as {_dns_1035(name)!r}",
            )
        )
    fabric = resolved.fabric
    if fabric.devices_vary and launch.section(Kubernetes).fabric_devices is None:
        problems.append(
            Problem(
                "launch.kubernetes.fabric_devices",
                f"each pod asks for its node's {fabric.name} devices "
                f"({fabric.kubernetes_resource}), whose count differs by machine (EFA: "
                "p4d.24xlarge 4, trn1.32xlarge 8, p5.48xlarge 32): set it to your nodes' "
                "count; one device would carry a fraction of the traffic",
            )
        )
    if launcher.over_ssh and kind == TRAINJOB:
        nnodes = len(hosts_from_nodes(launch.nodes, launch.slots))
        if nnodes < 2:
            problems.append(
                Problem(
                    "launch.nodes",
                    f"one node: the Trainer's MPI runtime runs {launcher.name}'s launcher as "
                    "the first node and the others beside it, so one node would still be "
                    "written as two; give two or more nodes, or launcher: torchrun",
                )
            )
    if problems:
        raise SpecError(resolved.stack.source, problems)
    return kind


def _dns_1035(name: str) -> str:
    """name as a DNS-1035 label, for the message's suggestion."""
    label = re.sub("[^a-z0-9-]+", "-", name.lower()).strip("-")
    label = label if label[:1].isalpha() else f"run-{label}"
    return label[: 63 - len(_LONGEST_POD)].rstrip("-") or "run"


def pod_hosts(resolved: Resolved, job: str | None = None) -> list[str]:
    """The run's nodes as its pods are reached, in the hostfile's (node rank) order: the
    PyTorchJob's services, or the JobSet's pod hostnames with their subdomain."""
    kind = job_kind(resolved, job)
    spec = resolved.spec
    name = spec.name
    nnodes = len(hosts_from_nodes(spec.launch.nodes, spec.launch.slots))
    if kind == PYTORCHJOB:
        return [f"{name}-master-0", *(f"{name}-worker-{i}" for i in range(nnodes - 1))]
    if resolved.launcher.over_ssh:  # runLauncherAsNode: the launcher's pod is the first node
        hosts = [f"{name}-{LAUNCHER}-0-0.{name}"]
        return hosts + [f"{name}-{NODE}-0-{i}.{name}" for i in range(nnodes - 1)]
    return [f"{name}-{NODE}-0-{i}.{name}" for i in range(nnodes)]


def kubernetes_manifests(
    resolved: Resolved, *, image: str, job: str | None = None, files: PodFiles | None = None
) -> list[Manifest]:
    """The run's objects, in the order kubectl applies them: the ConfigMaps (files', the
    cluster folder's for ssh launchers), the claims builder makes, the TrainingRuntime, the
    job. No secret value is in them (``kubernetes_secrets`` has those)."""
    kind = job_kind(resolved, job)
    # the pods run the image themselves, whichever scheduler the stack was resolved for
    resolved = replace(resolved, runtime=POD_RUNTIME, scheduler=schedulers.get(NAME))
    check_pair(resolved)
    _check_network(resolved)
    if resolved.spec.launch.uneven:
        raise SpecError(
            resolved.stack.source,
            [
                Problem(
                    "launch.node_slots",
                    "a TrainJob or PyTorchJob runs numProcPerNode processes in every pod; "
                    "nodes of different sizes would need one replicated job per size, which "
                    "builder does not write yet: run it over ssh (`builder bundle`), or one "
                    "job per node size",
                )
            ],
        )
    spec, launcher = resolved.spec, resolved.launcher
    k8s = spec.launch.section(Kubernetes)
    nnodes = len(hosts_from_nodes(spec.launch.nodes, spec.launch.slots))
    mpi = launcher.over_ssh
    hosts = pod_hosts(resolved, kind)
    placement = Placement(tuple(hosts), hosts[0], spec.name, job_logs=spec.launch.logs or "")
    setup, command = prepare(resolved, image, CLUSTER_DIR, placement)
    env = dict(sorted({**dict(setup.env), **dict(command.env)}.items()))
    pod = _Pod(resolved, image, env, files)
    objects: list[Manifest] = []
    if files is not None:
        objects.append(_files_config_map(resolved, files))
    if mpi:
        objects.append(_cluster_config_map(resolved, hosts))
    objects += _claims(resolved)
    if kind == PYTORCHJOB:
        objects.append(_pytorchjob(resolved, pod, list(command.argv), nnodes))
    elif mpi:
        if not k8s.runtime:
            objects.append(_mpi_runtime(resolved, pod, nnodes))
        objects.append(_trainjob(resolved, pod, list(command.argv), nnodes, "mpi"))
    else:
        if not k8s.runtime:
            objects.append(_torch_runtime(resolved, pod, nnodes))
        objects.append(_trainjob(resolved, pod, list(command.argv), nnodes, "torch"))
    _refuse_secret_values(resolved, objects)
    _refuse_big_config_maps(resolved, objects)
    return objects


MAX_CONFIG_MAP = 1 << 20
"""The API server's limit on a ConfigMap's data, keys and values together (1 MiB,
k8s.io/api core/v1 validation: MaxSecretSize, applied to ConfigMaps too)."""


def _refuse_big_config_maps(resolved: Resolved, objects: list[Manifest]) -> None:
    """A ConfigMap the API server would refuse for its size (a hostfile of thousands of
    nodes) is refused here, naming what made it so."""
    for obj in objects:
        if obj["kind"] != "ConfigMap":
            continue
        data = obj.get("data") or {}
        size = sum(len(key.encode()) + len(value.encode()) for key, value in data.items())
        if size > MAX_CONFIG_MAP:
            raise SpecError(
                resolved.stack.source,
                [
                    Problem(
                        "launch.nodes",
                        f"the ConfigMap {obj['metadata']['name']} (the pods' hostfile and "
                        f"files) would hold {size:,} bytes, above the {MAX_CONFIG_MAP:,} the "
                        "API server takes: run fewer nodes per job",
                    )
                ],
            )


def kubernetes_secrets(
    resolved: Resolved, *, job: str | None = None, host_key: str | None = None
) -> list[Manifest]:
    """The Secrets the run reads, for the 0600 secrets file: launch.env's secret values
    (``NAME-env``), and for ssh launchers the cluster host key and its known_hosts line
    (``NAME-ssh-host``): host_key (a private key kept from an earlier file) or a new one."""
    kind = job_kind(resolved, job)
    spec = resolved.spec
    objects = []
    values = secret_env(spec.launch)
    if values:
        objects.append(_secret(resolved, f"{spec.name}-env", values))
    if resolved.launcher.over_ssh and kind == TRAINJOB:
        files = {f.path: f.text for f in host_key_files(f"builder-{spec.name}-host")}
        if host_key is not None:
            files = {HOST_PRIVATE: host_key, KNOWN_HOSTS: _known_hosts_of(host_key)}
        data = {HOST_PRIVATE: files[HOST_PRIVATE], KNOWN_HOSTS: files[KNOWN_HOSTS]}
        objects.append(_secret(resolved, f"{spec.name}-ssh-host", data))
    return objects


def kubernetes_text(
    resolved: Resolved, *, image: str, job: str | None = None, files: PodFiles | None = None
) -> str:
    """The manifests as kubectl reads them, for a run that needs no Secret (one that does
    is refused: its Secrets go only in a 0600 file, ``write_kubernetes``)."""
    text = manifests_yaml(kubernetes_manifests(resolved, image=image, job=job, files=files))
    if needs_secrets(resolved, job):
        raise UsageError(
            "the run needs Secrets (launch.env's secret values, or the cluster host key of an "
            "ssh launcher), which builder writes only to a 0600 file beside the manifests: "
            "give -o FILE",
            field="--output",
        )
    return text


def needs_secrets(resolved: Resolved, job: str | None = None) -> bool:
    """Whether the run reads a Secret builder writes (``kubernetes_secrets``)."""
    ssh = resolved.launcher.over_ssh and job_kind(resolved, job) == TRAINJOB
    return ssh or bool(secret_env(resolved.spec.launch))


SECRETS_SUFFIX = ".secrets.yaml"


def secrets_path(output: Path) -> Path:
    """The secrets file beside the manifests: k8s.yaml -> k8s.secrets.yaml."""
    stem = output.name.removesuffix(".yaml").removesuffix(".yml")
    return output.with_name(f"{stem}{SECRETS_SUFFIX}")


def write_kubernetes(
    resolved: Resolved,
    output: Path,
    *,
    image: str,
    job: str | None = None,
    force: bool = False,
    files: PodFiles | None = None,
) -> list[Path]:
    """Write the manifests at output and the Secrets (0600) at secrets_path(output), all or
    nothing; a file with other content is refused unless force. The cluster host key of
    an earlier secrets file there is kept, so the same spec writes the same bytes."""
    text = manifests_yaml(kubernetes_manifests(resolved, image=image, job=job, files=files))
    path = secrets_path(output)
    kept = None
    if path.is_file() and path.stat().st_size <= MAX_SECRETS_FILE:
        kept = kept_host_key(path.read_text(errors="replace"), resolved.spec.name)
    secrets = kubernetes_secrets(resolved, job=job, host_key=kept)
    written = [OutputFile(output.name, 0o644, text)]
    if secrets:
        written.append(OutputFile(path.name, SECRET_MODE, manifests_yaml(secrets)))
    return write_cluster_files(written, output.parent, force=force)


def kept_host_key(text: str, name: str) -> str | None:
    """The host key of an earlier secrets file (the Secret NAME-ssh-host), if any: kept,
    so that writing the manifests again does not change the key nodes are pinned to."""
    import yaml

    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return None
    for document in documents:
        if (
            isinstance(document, dict)
            and document.get("kind") == "Secret"
            and document.get("metadata", {}).get("name") == f"{name}-ssh-host"
        ):
            key = document.get("stringData", {}).get(HOST_PRIVATE)
            return key if isinstance(key, str) else None
    return None


PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*")
"""A string every YAML reader takes as the string it is when written plain: a letter, '_'
or '/' first, then letters, digits and ``_./-`` (no number, date, base-60 or ``<<``)."""
YAML11_WORDS = frozenset({"y", "yes", "n", "no", "true", "false", "on", "off", "null"})
"""Plain words YAML 1.1 reads as booleans or null, in any case (kubectl's reader, go-yaml
v2 under sigs.k8s.io/yaml, is YAML 1.1: `y` is true, `1e-4` a float, `0o17` an int)."""


def yaml_style(text: str) -> str | None:
    """How a manifest writes a string so that kubectl reads it back as that string: a
    literal block for files, plain where no YAML reader could take it for another type,
    else double-quoted."""
    if "\n" in text:
        return "|"  # files (hostfile, ssh config) as written; a block is never typed
    if PLAIN.fullmatch(text) and text.lower() not in YAML11_WORDS:
        return None
    return '"'


def manifests_yaml(objects: list[Manifest]) -> str:
    """Multi-document YAML that kubectl reads as builder wrote it: keys in the order built,
    no aliases, every string that any YAML 1.1 or 1.2 reader could resolve to another
    type quoted (``yaml_style``), the same bytes for the same objects."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # noqa: ARG002 - PyYAML's API
            return True

    def text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=yaml_style(data))

    _Dumper.add_representer(str, text)
    return yaml.dump_all(
        objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096
    )


def _known_hosts_of(private: str) -> str:
    """The known_hosts line of a kept host key (its public half, read by ssh-keygen)."""
    with tempfile.TemporaryDirectory(prefix="builder-keys-") as tmp:
        key = Path(tmp) / "key"
        key.write_text(private)
        key.chmod(0o600)
        result = subprocess.run(
            ["ssh-keygen", "-y", "-f", str(key)], capture_output=True, text=True, check=False
        )
    if result.returncode != 0:
        raise UsageError(f"the kept cluster host key is not a key: {result.stderr.strip()}")
    return known_hosts_text(result.stdout)


def _metadata(resolved: Resolved, name: str, labels: dict[str, str] | None = None) -> Manifest:
    k8s = resolved.spec.launch.section(Kubernetes)
    meta: Manifest = {"name": name}
    if k8s.namespace:
        meta["namespace"] = k8s.namespace
    meta["labels"] = {**MANAGED, "app.kubernetes.io/part-of": resolved.spec.name, **(labels or {})}
    return meta


def _secret(resolved: Resolved, name: str, data: dict[str, str]) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(resolved, name),
        "type": "Opaque",
        "stringData": dict(sorted(data.items())),
    }


def _cluster_config_map(resolved: Resolved, hosts: list[str]) -> Manifest:
    """What the cluster folder holds beside the keys: the hostfile (the launcher's pod
    first), .deepspeed_env, and the nodes' ssh client config with the pinned host key."""
    spec = resolved.spec
    nodes = [Host(host, spec.launch.slots) for host in hosts]
    data = {
        DSENV: dsenv_for(resolved, {}, None),
        HOSTFILE: hostfile_text(nodes),
        NODE_SSH_CONFIG: node_ssh_config(hosts, spec.image.ssh.port),
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(resolved, f"{spec.name}-cluster"),
        "data": data,
    }


def _files_config_map(resolved: Resolved, files: PodFiles) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(resolved, f"{resolved.spec.name}-{files.name}"),
        "data": dict(sorted(files.files)),
    }


def _claims(resolved: Resolved) -> list[Manifest]:
    """The claims builder writes: launch.code's and launch.cache's where the site names none."""
    spec = resolved.spec
    k8s = spec.launch.section(Kubernetes)
    claims = []
    for what, path, given in (
        ("code", spec.launch.code, k8s.code_claim),
        ("cache", spec.launch.cache, k8s.cache_claim),
    ):
        if path and not given:
            claim: Manifest = {
                "accessModes": ["ReadWriteMany"],
                "resources": {"requests": {"storage": k8s.claim_size}},
            }
            if k8s.storage_class:
                claim["storageClassName"] = k8s.storage_class
            claims.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": _metadata(resolved, f"{spec.name}-{what}", STORAGE),
                    "spec": claim,
                }
            )
    return claims


class _Pod:
    """What every pod of the run gets: the image, the run's environment, the device and
    fabric resources, the volumes at the paths the other schedulers bind, the placement."""

    def __init__(
        self, resolved: Resolved, image: str, env: dict[str, str], files: PodFiles | None
    ) -> None:
        self.resolved = resolved
        self.image = image
        self.env = env
        self.files = files
        spec = resolved.spec
        self.launch = spec.launch
        self.k8s = spec.launch.section(Kubernetes)
        self.name = spec.name

    def env_list(self, extra: dict[str, str] | None = None) -> list[Manifest]:
        env = {**self.env, **(extra or {})}
        return [{"name": key, "value": value} for key, value in env.items()]

    def env_from(self) -> list[Manifest]:
        if not secret_env(self.launch):
            return []
        return [{"secretRef": {"name": f"{self.name}-env"}}]

    def resources(self) -> Manifest:
        limits: dict[str, str] = {}
        device = self.resolved.platform.kubernetes_resource
        if device:
            limits[device] = str(self.launch.slots)
        fabric = self.resolved.fabric
        if fabric.kubernetes_resource:
            rdma = self.k8s.rdma_resource if fabric.net == "IB" else None
            limits[rdma or fabric.kubernetes_resource] = str(self.k8s.fabric_devices or 1)
        return {"limits": limits} if limits else {}

    def security_context(self) -> Manifest:
        add = list(self.resolved.platform.kubernetes_capabilities)
        if self.resolved.fabric.needs_memlock:
            # registering memory for RDMA: Mellanox/k8s-rdma-shared-dev-plugin v1.5.3's
            # example/test-hca-pod.yaml adds IPC_LOCK; docker's fabric flags lift memlock
            add.append("IPC_LOCK")
        return {"capabilities": {"add": sorted(set(add))}} if add else {}

    def mounts(self, cluster: bool) -> list[Manifest]:
        mounts: list[Manifest] = [{"name": "dshm", "mountPath": SHM}]
        if cluster:
            mounts.append({"name": "cluster", "mountPath": CLUSTER_DIR, "readOnly": True})
        if self.files is not None:
            mounts.append({"name": self.files.name, "mountPath": self.files.path, "readOnly": True})
        launch = self.launch
        if launch.code:
            mounts.append({"name": "code", "mountPath": self.resolved.spec.image.workdir})
        for index, (field, path) in enumerate(launch.own_path_folders()):
            mounts.append({"name": _volume_name(field, index), "mountPath": path})
        for index, mount in enumerate(launch.mounts):
            entry: Manifest = {"name": f"mount-{index}", "mountPath": mount.target}
            if mount.read_only:
                entry["readOnly"] = True
            mounts.append(entry)
        return mounts

    def volumes(self, cluster: bool) -> list[Manifest]:
        shm: Manifest = {"medium": "Memory"}
        if self.k8s.shm_size:
            shm["sizeLimit"] = self.k8s.shm_size
        volumes: list[Manifest] = [{"name": "dshm", "emptyDir": shm}]
        if cluster:
            volumes.append(self._cluster_volume())
        if self.files is not None:
            config = {"name": f"{self.name}-{self.files.name}", "defaultMode": 0o444}
            volumes.append({"name": self.files.name, "configMap": config})
        launch, k8s = self.launch, self.k8s
        if launch.code:
            claim = k8s.code_claim or f"{self.name}-code"
            volumes.append({"name": "code", "persistentVolumeClaim": {"claimName": claim}})
        for index, (field, path) in enumerate(launch.own_path_folders()):
            volume = _volume_name(field, index)
            if field == "launch.cache":
                claim = k8s.cache_claim or f"{self.name}-cache"
                volumes.append({"name": volume, "persistentVolumeClaim": {"claimName": claim}})
            else:  # shared storage at the same path on every node: the node's own path
                volumes.append({"name": volume, "hostPath": {"path": path, "type": "Directory"}})
        for index, mount in enumerate(launch.mounts):
            volumes.append(
                {"name": f"mount-{index}", "hostPath": {"path": mount.source, "type": "Directory"}}
            )
        return volumes

    def pod_metadata(self, labels: dict[str, str] | None = None) -> Manifest:
        """The pod template's metadata: labels, and the secondary network it joins."""
        metadata: Manifest = {}
        if labels:
            metadata["labels"] = dict(labels)
        if self.k8s.network:
            metadata["annotations"] = {MULTUS: self.k8s.network}
        return metadata

    def _cluster_volume(self) -> Manifest:
        """The cluster folder as the entrypoint reads a bundle: builder's ConfigMap, the
        host key Secret, and the MPI plugin's key Secret under the bundle's names."""
        trainer_keys = f"{self.name}-mpi-ssh-auth"
        return {
            "name": "cluster",
            "projected": {
                "defaultMode": 0o400,
                "sources": [
                    {"configMap": {"name": f"{self.name}-cluster"}},
                    {
                        "secret": {
                            "name": f"{self.name}-ssh-host",
                            "items": [
                                {"key": HOST_PRIVATE, "path": HOST_PRIVATE},
                                {"key": KNOWN_HOSTS, "path": KNOWN_HOSTS},
                            ],
                        }
                    },
                    {
                        "secret": {
                            "name": trainer_keys,
                            "items": [
                                {"key": "ssh-privatekey", "path": PRIVATE},
                                {"key": "ssh-publickey", "path": PUBLIC},
                                {"key": "ssh-publickey", "path": AUTHORIZED},
                            ],
                        }
                    },
                ],
            },
        }

    def container(
        self,
        name: str,
        *,
        args: list[str] | None,
        cluster: bool,
        env: bool = True,
        ports: list[Manifest] | None = None,
        probe: Manifest | None = None,
    ) -> Manifest:
        """A container of the image; args is its CMD (the image's entrypoint stays)."""
        container: Manifest = {"name": name, "image": self.image}
        if args is not None:
            container["args"] = args
        container["workingDir"] = self.resolved.spec.image.workdir
        if env:
            container["env"] = self.env_list()
            if env_from := self.env_from():
                container["envFrom"] = env_from
        if ports:
            container["ports"] = ports
        if probe:
            container["readinessProbe"] = probe
        if resources := self.resources():
            container["resources"] = resources
        if security := self.security_context():
            container["securityContext"] = security
        container["volumeMounts"] = self.mounts(cluster)
        return container

    def pod_spec(self, containers: list[Manifest], *, cluster: bool, restart: str) -> Manifest:
        spec: Manifest = {"restartPolicy": restart, "containers": containers}
        k8s = self.k8s
        if k8s.host_network:
            spec["hostNetwork"] = True
            spec["dnsPolicy"] = "ClusterFirstWithHostNet"  # the job's Service names still resolve
        if k8s.node_selector:
            spec["nodeSelector"] = dict(k8s.node_selector)
        if k8s.tolerations:
            spec["tolerations"] = [_toleration(t) for t in k8s.tolerations]
        if k8s.image_pull_secrets:
            spec["imagePullSecrets"] = [{"name": n} for n in k8s.image_pull_secrets]
        spec["volumes"] = self.volumes(cluster)
        return spec


def _volume_name(field: str, index: int) -> str:  # noqa: ARG001 - one per field
    return field.removeprefix("launch.")


def _toleration(toleration: Any) -> Manifest:
    entry: Manifest = {}
    if toleration.key is not None:
        entry["key"] = toleration.key
    entry["operator"] = toleration.operator
    if toleration.value is not None:
        entry["value"] = toleration.value
    if toleration.effect is not None:
        entry["effect"] = toleration.effect
    return entry


def _job_labels(resolved: Resolved) -> dict[str, str]:
    queue = resolved.spec.launch.section(Kubernetes).queue
    return {QUEUE_LABEL: queue} if queue else {}


def _replicated_job(
    name: str, pod: _Pod, pod_spec: Manifest, *, ancestor: bool, depends: str | None = None
) -> Manifest:
    """One replicated Job of the runtime's JobSet. Its backoffLimit is launch.restarts,
    written out: Kubernetes' default (6) would run a failed node's pod, and so the
    training, six more times where the spec asked for no restart."""
    job: Manifest = {"name": name}
    if depends:
        job["dependsOn"] = [{"name": depends, "status": "Ready"}]
    template: Manifest = {}
    if ancestor:
        template["metadata"] = {"labels": dict(ANCESTOR)}
    pod_template: Manifest = {"spec": pod_spec}
    if metadata := pod.pod_metadata():
        pod_template = {"metadata": metadata, **pod_template}
    restarts = pod.launch.restarts
    template["spec"] = {"backoffLimit": restarts, "template": pod_template}
    job["template"] = template
    return job


def _torch_runtime(resolved: Resolved, pod: _Pod, nnodes: int) -> Manifest:
    node = pod.container(NODE, args=None, cluster=False, env=False)
    spec = pod.pod_spec([node], cluster=False, restart="Never")
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainingRuntime",
        "metadata": _metadata(
            resolved, resolved.spec.name, {f"{TRAINER_GROUP}/framework": "torch"}
        ),
        "spec": {
            "mlPolicy": {"numNodes": nnodes, "torch": {}},
            "template": {
                "spec": {"replicatedJobs": [_replicated_job(NODE, pod, spec, ancestor=True)]}
            },
        },
    }


def _mpi_runtime(resolved: Resolved, pod: _Pod, nnodes: int) -> Manifest:
    port = resolved.spec.image.ssh.port
    ssh_port = [{"name": "ssh", "containerPort": port}]
    probe = {"tcpSocket": {"port": port}, "initialDelaySeconds": 2, "periodSeconds": 2}
    sshd = pod.container(
        NODE, args=["/usr/sbin/sshd", "-D", "-e"], cluster=True, ports=ssh_port, probe=probe
    )
    launcher = pod.container(NODE, args=None, cluster=True, env=False, ports=ssh_port)
    policy = {
        "numProcPerNode": resolved.spec.launch.slots,
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": TRAINER_SSH,
        "runLauncherAsNode": True,
    }
    jobs = [
        _replicated_job(
            NODE, pod, pod.pod_spec([sshd], cluster=True, restart="Never"), ancestor=False
        ),
        _replicated_job(
            LAUNCHER,
            pod,
            pod.pod_spec([launcher], cluster=True, restart="Never"),
            ancestor=True,
            depends=NODE,
        ),
    ]
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainingRuntime",
        "metadata": _metadata(resolved, resolved.spec.name, {FRAMEWORK: "mpi"}),
        "spec": {
            "mlPolicy": {"numNodes": nnodes, "mpi": policy},
            "template": {
                "spec": {
                    "network": {"publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All", "targetReplicatedJobs": [LAUNCHER]},
                    "replicatedJobs": jobs,
                }
            },
        },
    }


def _trainjob(resolved: Resolved, pod: _Pod, argv: list[str], nnodes: int, policy: str) -> Manifest:
    spec, k8s = resolved.spec, resolved.spec.launch.section(Kubernetes)
    # the launcher's pod starts its own sshd first: it is a node of the hostfile too
    extra = {"BUILDER_SSHD": "1"} if policy == "mpi" else {}
    trainer: Manifest = {
        "image": pod.image,
        "args": argv,
        "env": pod.env_list(extra) + _secret_refs(resolved),
        "numNodes": nnodes,
        "numProcPerNode": spec.launch.slots,
    }
    if resources := pod.resources():
        trainer["resourcesPerNode"] = resources
    runtime_ref = {
        "name": k8s.runtime or spec.name,
        "apiGroup": TRAINER_GROUP,
        "kind": "ClusterTrainingRuntime" if k8s.runtime else "TrainingRuntime",
    }
    job: Manifest = {"runtimeRef": runtime_ref, "trainer": trainer}
    if k8s.runtime:
        job |= _runtime_patch(resolved, pod, policy)
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": _metadata(resolved, spec.name, _job_labels(resolved)),
        "spec": job,
    }


def _runtime_patch(resolved: Resolved, pod: _Pod, policy: str) -> Manifest:
    """What a named ClusterTrainingRuntime gets from the run, in the TrainJob field of the
    cluster's Trainer release (launch.kubernetes.trainer): its pods' volumes, node
    selector, tolerations and pull secrets, their annotations (a Multus network), its node
    container's mounts and capabilities. Each release's types
    (pkg/apis/trainer/v1alpha1/trainjob_types.go at the tag): v2.2.0's runtimePatches
    take a whole pod template; v2.1.0's podTemplateOverrides a pod's metadata and spec,
    but a container's env and volumeMounts only; v2.0.0's podSpecOverrides neither
    metadata nor pull secrets either. What a release cannot carry is refused: a pod
    without it would start and then fail (no device, no image)."""
    cluster = policy == "mpi"
    full = pod.pod_spec([], cluster=cluster, restart="Never")
    keys = ("nodeSelector", "tolerations", "imagePullSecrets", "volumes")
    patch: Manifest = {key: full[key] for key in keys if key in full}
    container: Manifest = {"name": NODE}
    security = pod.security_context()
    if security:
        container["securityContext"] = security
    container["volumeMounts"] = pod.mounts(cluster)
    patch["containers"] = [container]
    jobs = [NODE, LAUNCHER] if cluster else [NODE]
    metadata = pod.pod_metadata()  # the pods' annotations (a Multus network)
    release = pod.k8s.trainer
    if release == "2.2":
        template: Manifest = {"spec": patch}
        if metadata:
            template = {"metadata": metadata, **template}
        replicated = [{"name": job, "template": {"spec": {"template": template}}} for job in jobs]
        spec = {"template": {"spec": {"replicatedJobs": replicated}}}
        return {"runtimePatches": [{"manager": "builder", "trainingRuntimeSpec": spec}]}
    lacking = {
        "a container's securityContext (the capabilities for RDMA or the device)": security,
        "the pods' annotations (launch.kubernetes.network)": release == "2.0" and metadata,
        "imagePullSecrets (launch.kubernetes.image_pull_secrets)": (
            release == "2.0" and "imagePullSecrets" in patch
        ),
    }
    missing = [what for what, needed in lacking.items() if needed]
    if missing:
        raise SpecError(
            resolved.stack.source,
            [
                Problem(
                    "launch.kubernetes.trainer",
                    f"Trainer {release}'s TrainJob cannot give the named runtime "
                    f"{' or '.join(missing)}: have the ClusterTrainingRuntime "
                    f"{pod.k8s.runtime} set it, run Trainer 2.2 or later (trainer: '2.2'), "
                    "or leave launch.kubernetes.runtime out (builder then writes the runtime)",
                )
            ],
        )
    container.pop("securityContext", None)
    targets = [{"name": job} for job in jobs]
    if release == "2.1":
        override: Manifest = {"targetJobs": targets}
        if metadata:
            override["metadata"] = metadata
        override["spec"] = patch
        return {"podTemplateOverrides": [override]}
    return {"podSpecOverrides": [{"targetJobs": targets, **patch}]}


def _secret_refs(resolved: Resolved) -> list[Manifest]:
    """launch.env's secret variables, each from the Secret NAME-env (the trainer's env
    reaches every node container, builder's runtime or a named one)."""
    name = f"{resolved.spec.name}-env"
    return [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": name, "key": key}}}
        for key in secret_env(resolved.spec.launch)
    ]


def _pytorchjob(resolved: Resolved, pod: _Pod, argv: list[str], nnodes: int) -> Manifest:
    port = [{"name": "pytorchjob-port", "containerPort": resolved.spec.launch.master_port}]
    container = pod.container(PYTORCH, args=argv, cluster=False, ports=port)
    spec = pod.pod_spec([container], cluster=False, restart="Never")
    template: Manifest = {"spec": spec}
    if metadata := pod.pod_metadata():
        template = {"metadata": metadata, **template}
    replicas: Manifest = {"Master": {"replicas": 1, "restartPolicy": "Never", "template": template}}
    if nnodes > 1:
        replicas["Worker"] = {
            "replicas": nnodes - 1,
            "restartPolicy": "Never",
            "template": template,
        }
    return {
        "apiVersion": TRAINING_API,
        "kind": "PyTorchJob",
        "metadata": _metadata(resolved, resolved.spec.name, _job_labels(resolved)),
        "spec": {
            # the pods (and their logs) are kept; a failed pod reruns launch.restarts times
            # at most (the operator's default would be 6 where the spec asked for none)
            "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": resolved.spec.launch.restarts},
            "nprocPerNode": str(resolved.spec.launch.slots),
            "pytorchReplicaSpecs": replicas,
        },
    }


def _check_network(resolved: Resolved) -> None:
    """A pod has only lo and eth0 (its own network namespace, no secondary network): an
    interface named by launch.socket_ifname, or the netdev an RDMA fabric addresses, is
    there only with the host's network or a secondary one. Refused otherwise, naming both
    ways: NCCL, gloo and HCCL would look for an interface that is not there."""
    spec = resolved.spec
    k8s = spec.launch.section(Kubernetes)
    ways = (
        "run the pods on the host's network (launch.kubernetes.host_network: true), or give "
        "them a secondary network with that interface (launch.kubernetes.network: a Multus "
        "NetworkAttachmentDefinition)"
    )
    problems = []
    if k8s.host_network and k8s.network:
        problems.append(
            Problem(
                "launch.kubernetes.network",
                "a pod on the host's network (host_network) gets no secondary network "
                "(Multus leaves hostNetwork pods alone): set one of them",
            )
        )
    elif not (k8s.host_network or k8s.network):
        interface = spec.launch.socket_ifname
        if interface and interface not in POD_INTERFACES:
            problems.append(
                Problem(
                    "launch.socket_ifname",
                    f"{interface!r}: a pod has only lo and eth0, so the collectives would "
                    f"look for an interface that is not there: {ways}; or leave "
                    "socket_ifname unset (or eth0, the pod's own) on Kubernetes",
                )
            )
        if resolved.fabric.host_interfaces:
            problems.append(
                Problem(
                    "image.fabric",
                    f"{resolved.fabric.name}: the RDMA device plugin gives a pod the HCA, not "
                    f"the netdev whose addresses its connections use: {ways}",
                )
            )
    if problems:
        raise SpecError(resolved.stack.source, problems)


def _refuse_secret_values(resolved: Resolved, objects: list[Manifest]) -> None:
    """A secret value written into a manifest (launch.args, a selector) is refused: the
    manifests are 0644, shown by kubectl and kept in the cluster's etcd unencrypted.
    Searched in the values as a YAML reader gets them back (quoting changes the text) and
    in the text itself, as written and as a shell line quotes it, and with every quote
    and backslash taken out of both (a launcher's own escaping: DeepSpeed's `\\$`)."""
    import yaml

    text = manifests_yaml(objects)
    strings = "\n".join(_strings(list(yaml.safe_load_all(text))))
    bare = _unquoted(strings)
    found = [
        Problem(
            f"launch.env.{key}",
            "its value (secret) appears in the Kubernetes manifests (launch.args, a path or "
            "an option holds it), which are not secret: pass it only through launch.env",
        )
        for key, value in secret_env(resolved.spec.launch).items()
        if len(value) >= 4
        and (
            any(form in text or form in strings for form in (value, shlex.quote(value)))
            or (len(_unquoted(value)) >= 4 and _unquoted(value) in bare)
        )
    ]
    if found:
        raise SpecError(resolved.stack.source, found)


def _unquoted(text: str) -> str:
    """text without the characters quoting adds (quotes, backslashes)."""
    return text.translate({ord(c): None for c in "\\'\""})


def _strings(value: object) -> list[str]:
    """Every string in parsed YAML, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in (*_strings(key), *_strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


@dataclass(frozen=True)
class Watch:
    """How kubectl finds a run's job and its pods."""

    operator: str
    """What the cluster needs installed for the job kind."""
    resource: str
    """kind/name, as kubectl get, wait and delete take it."""
    selector: str
    """The label every pod of the job carries (kubectl logs -l)."""
    done: str
    """The job's condition once it has ended well (kubectl wait --for=condition=)."""
    ns: str
    """' -n NAMESPACE', or nothing for the context's namespace."""
    pods: int
    """How many pods the job runs (a launcher pod included)."""


def watch_of(resolved: Resolved, job: str | None = None) -> Watch:
    """The run's job as kubectl finds it: a PyTorchJob (kubeflow.org/v1: condition
    Succeeded, pods labelled training.kubeflow.org/job-name) or a TrainJob (Trainer
    v2: condition Complete, pods of its JobSet)."""
    name = resolved.spec.name
    namespace = resolved.spec.launch.section(Kubernetes).namespace
    ns = f" -n {namespace}" if namespace else ""
    kind = job_kind(resolved, job)
    pods = len(pod_hosts(resolved, kind)) + 1
    if kind == PYTORCHJOB:
        return Watch(
            "Kubeflow's Training Operator (kubeflow.org/v1 PyTorchJob)",
            f"pytorchjob/{name}",
            f"training.kubeflow.org/job-name={name}",
            "Succeeded",
            ns,
            pods,
        )
    return Watch(
        "Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1 TrainJob and TrainingRuntime) "
        "with its JobSet controller",
        f"trainjob/{name}",
        f"jobset.sigs.k8s.io/jobset-name={name}",
        "Complete",
        ns,
        pods,
    )


def _readme(resolved: Resolved, image: str, spec_ref: str) -> str:
    """The run folder's README: what the cluster needs, and the commands from here to the
    run, its logs and its end."""
    spec = resolved.spec
    kind = job_kind(resolved)
    name = spec.name
    watch = watch_of(resolved)
    operator, selector, resource, ns = watch.operator, watch.selector, watch.resource, watch.ns
    secrets = needs_secrets(resolved)
    apply = (
        f"kubectl apply{ns} -f {SECRETS} -f {MANIFEST}"
        if secrets
        else (f"kubectl apply{ns} -f {MANIFEST}")
    )
    secret_line = (
        f"- `{SECRETS}` (0600): the Secrets the pods read (launch.env's secret values, an "
        "ssh launcher's cluster host key); their values appear nowhere else.\n"
        if secrets
        else ""
    )
    commands = image_commands(resolved, spec_ref=spec_ref, image=image)
    pushed = ", then ".join(f"`{c}`" for c in commands) or "pinned by its digest, it is there"
    return f"""# Kubernetes run: {name}

Image `{image}`, {resolved.launcher.name} as a {kind}.

## From here to the run

1. The cluster needs {operator} installed.
2. The image, in a registry every node pulls from: {pushed}.
3. Start the run: `{apply}`.
4. Watch it: `kubectl get{ns} {resource}` and `kubectl get{ns} pods -l {selector}`;
   its logs: `kubectl logs{ns} -l {selector} --prefix --tail=-1`.
5. End it (its pods on every node): `kubectl delete{ns} {resource}`. The claims, and
   the code in them, stay for the next run; `kubectl delete{ns} -f {MANIFEST}` removes
   them too, and with them, by the StorageClass's reclaim policy, their data.

`builder bundle {spec_ref} --scheduler kubernetes -o FOLDER` writes this folder again
after a change to the stack (the cluster host key is kept); files you changed by hand
are refused, not replaced.

## What is in it

- `{MANIFEST}`: the run's objects, in the order kubectl applies them.
{secret_line}"""

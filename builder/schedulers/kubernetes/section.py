"""launch.kubernetes: the Kubernetes scheduler's own section of the spec (which job,
where its pods go, their claims and networks), parsed and documented with the rest of
the spec, and the names Kubernetes takes (DNS-1123 labels, qualified names, quantities)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.model import Check, field, sorted_unique

DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
"""A Kubernetes DNS-1123 label: a namespace's, a volume's, a pod hostname's part."""
DNS_SUBDOMAIN = rf"(?=.{{1,253}}$){DNS_LABEL}(\.{DNS_LABEL})*"
"""A DNS-1123 subdomain: the names of claims, secrets, runtimes, storage classes."""
_QUALIFIED_PART = r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]"
QUALIFIED_NAME = rf"({DNS_SUBDOMAIN}/)?{_QUALIFIED_PART}"
"""A qualified name ([prefix/]name): a label key, a resource name (nvidia.com/gpu)."""
LABEL_VALUE = rf"({_QUALIFIED_PART})?"
"""A label value: at most 63 letters, digits, '-', '_', '.', alphanumeric at both ends."""
DNS_1035 = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
"""A DNS-1035 label: a Service's name (a-z first), which JobSet and the Training Operator
name after the job."""
QUANTITY = r"[1-9][0-9]{0,17}(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?"
"""A Kubernetes quantity as builder writes sizes: a whole number above 0 and a suffix
(64Gi): a claim of 0 is refused by the API server, a memory volume of 0 holds nothing."""
KUBERNETES_JOBS = ("trainjob", "pytorchjob")
TRAINER_RELEASES = ("2.0", "2.1", "2.2")
"""Kubeflow Trainer releases whose TrainJob patches a named runtime differently
(pkg/apis/trainer/v1alpha1/trainjob_types.go at v2.0.0: podSpecOverrides; v2.1.0:
podTemplateOverrides; v2.2.0 and later: runtimePatches)."""


def _kubernetes_name(pattern: str, what: str) -> Check:
    def check(value: str) -> str:
        if not re.fullmatch(pattern, value):
            raise ValueError(f"{value!r} is not {what}")
        return value

    return check


_DNS_LABEL_CHECK = _kubernetes_name(
    DNS_LABEL, "a DNS-1123 label (at most 63 of a-z, 0-9 and '-', alphanumeric at both ends)"
)
_SUBDOMAIN_CHECK = _kubernetes_name(
    DNS_SUBDOMAIN,
    "a DNS-1123 subdomain (lower-case labels of a-z, 0-9 and '-' joined by '.', at most 253)",
)
_QUALIFIED_CHECK = _kubernetes_name(
    QUALIFIED_NAME,
    "a qualified name ([prefix/]name: name at most 63 of letters, digits, '-', '_', '.', "
    "alphanumeric at both ends; prefix a DNS-1123 subdomain), e.g. rdma/hca_shared_devices_a",
)
_LABEL_VALUE_MESSAGE = (
    "a label value (at most 63 letters, digits, '-', '_' and '.', alphanumeric at both ends)"
)


def _label_value(value: str) -> str:
    if not value or not re.fullmatch(LABEL_VALUE, value):
        raise ValueError(f"{value!r} is not {_LABEL_VALUE_MESSAGE}")
    return value


MULTUS_NETWORK = rf"({DNS_LABEL}/)?{DNS_SUBDOMAIN}(@[A-Za-z0-9_.-]{{1,15}})?"
"""One Multus network selection: [namespace/]name[@interface]."""


def _network_check(value: str) -> str:
    if not re.fullmatch(MULTUS_NETWORK, value):
        raise ValueError(
            f"{value!r} is not a Multus network: [namespace/]name[@interface], the name a "
            "DNS-1123 subdomain (e.g. rdma-net or team/rdma-net@net1)"
        )
    return value


def _node_selector(selector: dict[str, str]) -> dict[str, str]:
    for key, value in selector.items():
        _QUALIFIED_CHECK(key)
        if not re.fullmatch(LABEL_VALUE, value):
            raise ValueError(f"{key}: {value!r} is not {_LABEL_VALUE_MESSAGE}")
    return dict(sorted(selector.items()))


def _pull_secrets(names: tuple[str, ...]) -> tuple[str, ...]:
    for name in names:
        _SUBDOMAIN_CHECK(name)
    return sorted_unique(names)


@dataclass(frozen=True)
class Toleration:
    """One pod toleration (a node taint the run's pods may be placed on)."""

    key: str | None = field(
        None,
        check=_QUALIFIED_CHECK,
        example="nvidia.com/gpu",
        description="The taint's key (a qualified name); unset with operator Exists: every taint.",
    )
    operator: str = field(
        "Equal", choices=lambda: ("Equal", "Exists"), description="Equal or Exists."
    )
    value: str | None = field(
        None,
        check=_label_value,
        example="present",
        description="The taint's value (operator Equal).",
    )
    effect: str | None = field(
        None,
        choices=lambda: ("NoSchedule", "PreferNoSchedule", "NoExecute"),
        example="NoSchedule",
        description="NoSchedule, PreferNoSchedule or NoExecute; unset: every effect.",
    )


def _tolerations(items: tuple[Toleration, ...]) -> tuple[Toleration, ...]:
    """The API server's rules for a toleration (ValidateTolerations): an empty key needs
    operator Exists (it matches every taint), and Exists takes no value."""
    for index, item in enumerate(items):
        if item.key is None and item.operator != "Exists":
            raise ValueError(
                f"[{index}]: operator {item.operator} needs a key (the taint's); without one, "
                "write operator: Exists, which tolerates every taint"
            )
        if item.operator == "Exists" and item.value is not None:
            raise ValueError(
                f"[{index}]: operator Exists matches the key whatever its value: leave value "
                "out, or write operator: Equal"
            )
    return items


@dataclass(frozen=True)
class Kubernetes:
    """Options of `builder kubernetes` (Kubeflow Trainer TrainJob or PyTorchJob manifests)."""

    job: str = field(
        "trainjob",
        choices=lambda: KUBERNETES_JOBS,
        description=(
            "trainjob (Kubeflow Trainer v2: torch for torchrun, MPI for deepspeed, "
            "gaudi_spawn and mpirun) or pytorchjob (the Training Operator's kubeflow.org/v1; "
            "torchrun only). `builder kubernetes --job` overrides."
        ),
    )
    runtime: str | None = field(
        None,
        check=_SUBDOMAIN_CHECK,
        example="torch-distributed",
        description=(
            "An existing ClusterTrainingRuntime the TrainJob names instead of the namespaced "
            "TrainingRuntime builder writes (trainjob only); the run's volumes, node "
            "selector and tolerations then go in the TrainJob's patch of it, as "
            "launch.kubernetes.trainer's release takes one."
        ),
    )
    trainer: str = field(
        "2.2",
        choices=lambda: TRAINER_RELEASES,
        description=(
            "The Kubeflow Trainer release the cluster runs: 2.2 (2.2 or later: the "
            "TrainJob's runtimePatches), 2.1 (podTemplateOverrides) or 2.0 "
            "(podSpecOverrides). Only a TrainJob that names launch.kubernetes.runtime "
            "differs; what an older release's patch cannot carry is refused."
        ),
    )
    namespace: str | None = field(
        None,
        check=_DNS_LABEL_CHECK,
        example="training",
        description="Namespace of every object; unset: kubectl's current one.",
    )
    queue: str | None = field(
        None,
        check=_label_value,
        example="team-a",
        description="Kueue LocalQueue: the job's kueue.x-k8s.io/queue-name label.",
    )
    node_selector: dict[str, str] = field(
        default_factory=dict,
        check=_node_selector,
        example="{nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}",
        description="Node labels the run's pods must have (label keys and values).",
    )
    tolerations: tuple[Toleration, ...] = field(
        (),
        check=_tolerations,
        example="[{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]",
        description="Taints the run's pods tolerate.",
    )
    image_pull_secrets: tuple[str, ...] = field(
        (),
        check=_pull_secrets,
        example="[registry-login]",
        description="Secrets (docker-registry) the nodes pull the image with.",
    )
    code_claim: str | None = field(
        None,
        check=_SUBDOMAIN_CHECK,
        example="team-code",
        description=(
            "The site's PersistentVolumeClaim holding launch.code, mounted at image.workdir; "
            "unset (with launch.code set): builder writes a claim NAME-code."
        ),
    )
    cache_claim: str | None = field(
        None,
        check=_SUBDOMAIN_CHECK,
        example="team-cache",
        description=(
            "The site's PersistentVolumeClaim for launch.cache, mounted at launch.cache; "
            "unset (with launch.cache set): builder writes a claim NAME-cache."
        ),
    )
    claim_size: str = field(
        "100Gi",
        pattern=QUANTITY,
        description="Storage each claim builder writes asks for (ReadWriteMany).",
    )
    storage_class: str | None = field(
        None,
        check=_SUBDOMAIN_CHECK,
        example="nfs-client",
        description="StorageClass of the claims builder writes; unset: the cluster's default.",
    )
    shm_size: str | None = field(
        None,
        pattern=QUANTITY,
        example="64Gi",
        description=(
            "sizeLimit of the memory-backed /dev/shm (an emptyDir, medium Memory); unset: "
            "bounded by the pod's memory only."
        ),
    )
    rdma_resource: str | None = field(
        None,
        check=_QUALIFIED_CHECK,
        example="rdma/hca_shared_devices_a",
        description=(
            "The RDMA device resource of image.fabric infiniband or roce (the RDMA shared "
            "device plugin's name is the site's); default rdma/rdma_shared_device_a. EFA: "
            "vpc.amazonaws.com/efa unless set."
        ),
    )
    host_network: bool = field(
        False,
        description=(
            "Run the pods on their nodes' network (hostNetwork, with dnsPolicy "
            "ClusterFirstWithHostNet): the host's interfaces, for launch.socket_ifname and "
            "an RDMA fabric (infiniband, roce). With launch.kubernetes.runtime the named "
            "ClusterTrainingRuntime must set it itself (Trainer's runtimePatches cannot)."
        ),
    )
    network: str | None = field(
        None,
        check=_network_check,
        example="rdma-net",
        description=(
            "A secondary network for the pods: a Multus NetworkAttachmentDefinition, "
            "[namespace/]name[@interface] (the k8s.v1.cni.cncf.io/networks annotation); "
            "launch.socket_ifname then names its interface in the pod (Multus: net1 "
            "unless @interface names one)."
        ),
    )
    fabric_devices: int | None = field(
        None,
        ge=1,
        le=64,
        example="32",
        description=(
            "How many of the fabric's device resource each pod asks for: required for EFA, "
            "whose count differs by instance (p4d.24xlarge 4, trn1.32xlarge 8, "
            "p5.48xlarge 32); default 1 for the RDMA shared device plugin's resource."
        ),
    )

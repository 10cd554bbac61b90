"""`builder kubernetes`: TrainJob and PyTorchJob manifests from the same plan (engine-free).

The objects' shapes are checked against the Kubeflow and Kubernetes models in
tests/conformance; here: what builder decides (resources, secrets, names, refusals).
"""

from __future__ import annotations

import dataclasses
import stat
import time
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from typer.testing import CliRunner

from builder import kubernetes_manifests, kubernetes_secrets, manifests_yaml, resolve
from builder.cli.app import app
from builder.errors import SpecError
from builder.spec.loader import load_preset, parse_spec
from builder.spec.presets import preset_names

if TYPE_CHECKING:
    from pathlib import Path

IMAGE = "registry.example/team/train:1"
DIGEST = "registry.example/team/train@sha256:" + "a" * 64


def _resolved(name: str, **launch: Any) -> Any:
    spec = load_preset(name).spec
    if launch:
        spec = dataclasses.replace(spec, launch=dataclasses.replace(spec.launch, **launch))
    return resolve(spec, scheduler_name="kubernetes")


def _kinds(objects: list[dict[str, Any]]) -> list[str]:
    return [o["kind"] for o in objects]


def _containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for o in objects:
        if o["kind"] == "TrainingRuntime":
            for job in o["spec"]["template"]["spec"]["replicatedJobs"]:
                found += job["template"]["spec"]["template"]["spec"]["containers"]
        if o["kind"] == "PyTorchJob":
            for replica in o["spec"]["pytorchReplicaSpecs"].values():
                found += replica["template"]["spec"]["containers"]
    return found


def _spec(text: str) -> Any:
    return parse_spec(text, "test.yaml")


@pytest.mark.parametrize("name", preset_names())
@pytest.mark.parametrize("job", ["trainjob", "pytorchjob"])
def test_every_preset_renders_or_is_refused_with_the_field(name: str, job: str) -> None:
    resolved = _resolved(name)
    if job == "pytorchjob" and resolved.launcher.over_ssh:
        with pytest.raises(SpecError) as caught:
            kubernetes_manifests(resolved, image=IMAGE, job=job)
        assert caught.value.problems[0].path == "--job"
        return
    objects = kubernetes_manifests(resolved, image=IMAGE, job=job)
    assert _kinds(objects)[-1] == ("PyTorchJob" if job == "pytorchjob" else "TrainJob")
    text = manifests_yaml(objects)
    assert list(yaml.safe_load_all(text)) == objects
    assert text == manifests_yaml(kubernetes_manifests(_resolved(name), image=IMAGE, job=job))


def test_documents_come_in_dependency_order() -> None:
    objects = kubernetes_manifests(_resolved("cuda-deepspeed"), image=IMAGE)
    assert _kinds(objects) == [
        "ConfigMap",
        "PersistentVolumeClaim",
        "PersistentVolumeClaim",
        "TrainingRuntime",
        "TrainJob",
    ]
    runtime = objects[3]["spec"]
    assert runtime["mlPolicy"]["mpi"] == {
        "numProcPerNode": 8,
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": "/etc/builder/trainer-ssh",
        "runLauncherAsNode": True,
    }
    trainer = objects[4]["spec"]["trainer"]
    assert trainer["args"][0] == "deepspeed"
    assert "cuda-deepspeed-launcher-0-0.cuda-deepspeed" in trainer["args"]


def test_the_image_is_the_one_given_digest_and_all() -> None:
    objects = kubernetes_manifests(_resolved("cuda-torchrun"), image=DIGEST)
    assert {c["image"] for c in _containers(objects)} == {DIGEST}
    assert objects[-1]["spec"]["trainer"]["image"] == DIGEST


@pytest.mark.parametrize(
    ("name", "resource"),
    [
        ("cuda-torchrun", "nvidia.com/gpu"),
        ("rocm-deepspeed", "amd.com/gpu"),
        ("gaudi-deepspeed", "habana.ai/gaudi"),
        ("cpu-deepspeed", None),
    ],
)
def test_device_resources_per_platform(name: str, resource: str | None) -> None:
    resolved = _resolved(name)
    for container in _containers(kubernetes_manifests(resolved, image=IMAGE)):
        limits = container.get("resources", {}).get("limits", {})
        if resource is None:
            assert limits == {}
        else:
            assert limits == {resource: str(resolved.spec.launch.slots)}


def _with_fabric(name: str, fabric: str, **k8s: Any) -> Any:
    spec = load_preset(name).spec
    spec = dataclasses.replace(spec, image=dataclasses.replace(spec.image, fabric=fabric))
    if k8s:
        kube = dataclasses.replace(spec.launch.kubernetes, **k8s)
        spec = dataclasses.replace(spec, launch=dataclasses.replace(spec.launch, kubernetes=kube))
    return resolve(spec, scheduler_name="kubernetes")


@pytest.mark.parametrize(
    ("fabric", "k8s", "resource", "count"),
    [
        ("infiniband", {}, "rdma/rdma_shared_device_a", "1"),
        ("roce", {"rdma_resource": "rdma/hca_shared_devices_a"}, "rdma/hca_shared_devices_a", "1"),
        ("efa", {"fabric_devices": 32}, "vpc.amazonaws.com/efa", "32"),
    ],
)
def test_fabric_resources_ipc_lock_and_the_collective_variables(
    fabric: str, k8s: dict[str, Any], resource: str, count: str
) -> None:
    resolved = _with_fabric("cuda-torchrun", fabric, **k8s)
    objects = kubernetes_manifests(resolved, image=IMAGE)
    container = _containers(objects)[0]
    assert container["resources"]["limits"][resource] == count
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    env = {e["name"]: e.get("value") for e in objects[-1]["spec"]["trainer"]["env"]}
    for name, value in resolved.network.env.items():
        assert env[name] == value


def test_shm_is_memory_backed_with_its_size() -> None:
    spec = _spec(
        "name: t\nimage: {accelerator: cpu, torch: '2.11.0'}\n"
        "launch: {launcher: torchrun, kubernetes: {shm_size: 64Gi}}\n"
    )
    objects = kubernetes_manifests(resolve(spec, scheduler_name="kubernetes"), image=IMAGE)
    volumes = objects[-2]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
        "template"
    ]["spec"]["volumes"]
    assert volumes[0] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}


def test_site_claims_replace_the_written_ones() -> None:
    spec = _spec(
        "name: t\nimage: {accelerator: cpu, torch: '2.11.0'}\n"
        "launch: {launcher: torchrun, code: /c, cache: /k,"
        " kubernetes: {code_claim: site-code, cache_claim: site-cache, namespace: ml,"
        " queue: team-a, node_selector: {pool: gpu}, image_pull_secrets: [pull]}}\n"
    )
    objects = kubernetes_manifests(resolve(spec, scheduler_name="kubernetes"), image=IMAGE)
    assert _kinds(objects) == ["TrainingRuntime", "TrainJob"]
    pod = objects[0]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
        "template"
    ]["spec"]
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"][1:]}
    assert claims == {"code": "site-code", "cache": "site-cache"}
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts == {"dshm": "/dev/shm", "code": "/workspace", "cache": "/k"}
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert pod["imagePullSecrets"] == [{"name": "pull"}]
    assert objects[1]["metadata"]["namespace"] == "ml"
    assert objects[1]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"


def test_secrets_are_only_in_the_secrets_objects() -> None:
    resolved = _resolved("cuda-torchrun", env={"HF_TOKEN": "hf_s3cret_value"})
    text = manifests_yaml(kubernetes_manifests(resolved, image=IMAGE))
    assert "hf_s3cret_value" not in text
    assert "secretKeyRef" in text
    secrets = kubernetes_secrets(resolved)
    assert secrets[0]["stringData"] == {"HF_TOKEN": "hf_s3cret_value"}


def test_a_secret_value_in_a_manifest_is_refused() -> None:
    resolved = _resolved(
        "cuda-torchrun", env={"HF_TOKEN": "hf_s3cret_value"}, args=("--t", "hf_s3cret_value")
    )
    with pytest.raises(SpecError) as caught:
        kubernetes_manifests(resolved, image=IMAGE)
    assert caught.value.problems[0].path == "launch.env.HF_TOKEN"


def test_the_host_key_is_kept_and_the_ssh_secret_is_the_trainers() -> None:
    resolved = _resolved("cpu-deepspeed")
    first = kubernetes_secrets(resolved)
    key = first[0]["stringData"]["ssh_host_ed25519_key"]
    again = kubernetes_secrets(resolved, host_key=key)
    assert again == first
    objects = kubernetes_manifests(resolved, image=IMAGE)
    assert "cpu-deepspeed-mpi-ssh-auth" in manifests_yaml(objects)


@pytest.mark.parametrize(
    ("yaml_launch", "field"),
    [
        ("kubernetes: {namespace: Bad_NS}", "launch.kubernetes.namespace"),
        ("kubernetes: {rdma_resource: 'bad name'}", "launch.kubernetes.rdma_resource"),
        ("kubernetes: {node_selector: {'-bad': x}}", "launch.kubernetes.node_selector"),
        ("kubernetes: {queue: 'no spaces'}", "launch.kubernetes.queue"),
        ("kubernetes: {code_claim: Upper}", "launch.kubernetes.code_claim"),
        ("kubernetes: {image_pull_secrets: [a_b]}", "launch.kubernetes.image_pull_secrets"),
    ],
)
def test_bad_names_exit_1_naming_the_field(tmp_path: Path, yaml_launch: str, field: str) -> None:
    spec = tmp_path / "stack.yaml"
    spec.write_text(
        f"name: t\nimage: {{accelerator: cpu, torch: '2.11.0'}}\nlaunch: {{{yaml_launch}}}\n"
    )
    out = tmp_path / "k.yaml"
    result = CliRunner().invoke(app, ["kubernetes", str(spec), "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert field in result.output
    assert not out.exists()


def test_a_stack_name_that_is_no_pod_name_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "stack.yaml"
    spec.write_text("name: t.x\nimage: {accelerator: cpu, torch: '2.11.0'}\n")
    result = CliRunner().invoke(app, ["kubernetes", str(spec), "-o", str(tmp_path / "k.yaml")])
    assert result.exit_code == 1
    assert "name" in result.output


def test_pytorchjob_with_deepspeed_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "k.yaml"
    result = CliRunner().invoke(
        app, ["kubernetes", "--preset", "cuda-deepspeed", "--job", "pytorchjob", "-o", str(out)]
    )
    assert result.exit_code == 1
    assert "--job" in result.output
    assert not out.exists()


def test_the_cli_writes_the_secrets_beside_0600_and_again_the_same(tmp_path: Path) -> None:
    out = tmp_path / "k.yaml"
    args = ["kubernetes", "--preset", "cpu-deepspeed", "-o", str(out), "--json"]
    assert CliRunner().invoke(app, args).exit_code == 0
    secrets = tmp_path / "k.secrets.yaml"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    before = (out.read_bytes(), secrets.read_bytes())
    assert "PRIVATE KEY" not in out.read_text()
    assert CliRunner().invoke(app, args).exit_code == 0  # the same bytes: no --force needed
    assert (out.read_bytes(), secrets.read_bytes()) == before
    out.write_text("mine\n")
    assert CliRunner().invoke(app, args).exit_code == 3  # other content: --force


def test_stdout_is_refused_where_secrets_are_needed() -> None:
    result = CliRunner().invoke(app, ["kubernetes", "--preset", "cpu-deepspeed"])
    assert result.exit_code == 2
    assert "-o FILE" in result.output


def test_a_64_node_spec_renders_fast() -> None:
    spec = _spec(
        "name: big\n"
        "image: {accelerator: cpu, torch: '2.11.0', deepspeed: '0.18.0', fabric: infiniband}\n"
        "launch: {launcher: deepspeed, nodes: ['gpu[001-064]'], slots: 8}\n"
    )
    resolved = resolve(spec, scheduler_name="kubernetes")
    start = time.perf_counter()
    objects = kubernetes_manifests(resolved, image=IMAGE)
    manifests_yaml(objects)
    assert time.perf_counter() - start < 0.5
    assert objects[-1]["spec"]["trainer"]["numNodes"] == 64
    assert objects[0]["data"]["hostfile"].count("slots=8") == 64

"""`builder kubernetes`: TrainJob and PyTorchJob manifests from the same plan (engine-free).

The objects' shapes are checked against the Kubeflow and Kubernetes models in
tests/conformance; here: what builder decides (resources, secrets, names, refusals).
"""

from __future__ import annotations

import dataclasses
import json
import stat
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from typer.testing import CliRunner

from builder import kubernetes_manifests, kubernetes_secrets, manifests_yaml, resolve
from builder.cli.app import app
from builder.errors import SpecError
from builder.image.pin import SCHEMA as PIN_SCHEMA
from builder.preflight.report import MARK
from builder.schedulers.kubernetes.section import Kubernetes
from builder.spec.loader import load_preset, parse_spec
from builder.spec.presets import preset_names, preset_text

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
        kube = dataclasses.replace(spec.launch.section(Kubernetes), **k8s)
        spec = dataclasses.replace(spec, launch=spec.launch.with_section(kube))
    return resolve(spec, scheduler_name="kubernetes")


@pytest.mark.parametrize(
    ("fabric", "k8s", "resource", "count"),
    [
        ("infiniband", {"host_network": True}, "rdma/rdma_shared_device_a", "1"),
        (
            "roce",
            {"rdma_resource": "rdma/hca_shared_devices_a", "network": "roce-net"},
            "rdma/hca_shared_devices_a",
            "1",
        ),
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


@pytest.mark.parametrize(
    ("fabric", "interface", "fields"),
    [
        ("none", "ib0", ["launch.socket_ifname"]),
        ("infiniband", None, ["image.fabric"]),
        ("roce", "enp1s0", ["launch.socket_ifname", "image.fabric"]),
    ],
)
def test_the_hosts_interfaces_need_the_host_network_or_a_secondary_one(
    fabric: str, interface: str | None, fields: list[str]
) -> None:
    """A pod has lo and eth0 only: an interface of the nodes' (socket_ifname) or an RDMA
    fabric's netdev is refused without hostNetwork or a Multus network, naming both."""
    resolved = _with_fabric("cuda-torchrun", fabric)
    spec = dataclasses.replace(
        resolved.spec, launch=dataclasses.replace(resolved.spec.launch, socket_ifname=interface)
    )
    with pytest.raises(SpecError) as caught:
        kubernetes_manifests(resolve(spec, scheduler_name="kubernetes"), image=IMAGE)
    assert [problem.path for problem in caught.value.problems] == fields
    assert "host_network: true" in str(caught.value)
    assert "launch.kubernetes.network" in str(caught.value)
    for k8s in ({"host_network": True}, {"network": "team/rdma@net1"}):
        kube = dataclasses.replace(spec.launch.section(Kubernetes), **k8s)
        ok = dataclasses.replace(spec, launch=spec.launch.with_section(kube))
        objects = kubernetes_manifests(resolve(ok, scheduler_name="kubernetes"), image=IMAGE)
        pod = objects[-2]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
            "template"
        ]
        if "network" in k8s:
            assert pod["metadata"]["annotations"] == {
                "k8s.v1.cni.cncf.io/networks": "team/rdma@net1"
            }
            assert "hostNetwork" not in pod["spec"]
        else:
            assert pod["spec"]["hostNetwork"] is True
            assert "metadata" not in pod


def test_eth0_is_every_pods_own() -> None:
    resolved = _with_fabric("cuda-torchrun", "none")
    spec = dataclasses.replace(
        resolved.spec, launch=dataclasses.replace(resolved.spec.launch, socket_ifname="eth0")
    )
    objects = kubernetes_manifests(resolve(spec, scheduler_name="kubernetes"), image=IMAGE)
    env = {e["name"]: e.get("value") for e in objects[-1]["spec"]["trainer"]["env"]}
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"


def test_host_network_and_a_secondary_network_are_one_or_the_other() -> None:
    resolved = _with_fabric("cuda-torchrun", "none", host_network=True, network="net")
    with pytest.raises(SpecError, match=r"launch.kubernetes.network: a pod on the host's"):
        kubernetes_manifests(resolved, image=IMAGE)


@pytest.mark.parametrize("restarts", [0, 3])
def test_a_failed_pod_reruns_only_as_often_as_launch_restarts_says(restarts: int) -> None:
    """backoffLimit written out on every Job: Kubernetes' default of 6 would rerun a failed
    node's pod, and the training, six times where the spec asked for none."""
    resolved = _with_fabric("cuda-torchrun", "none")
    launch = dataclasses.replace(resolved.spec.launch, restarts=restarts)
    spec = dataclasses.replace(resolved.spec, launch=launch)
    for job in ("trainjob", "pytorchjob"):
        objects = kubernetes_manifests(
            resolve(spec, scheduler_name="kubernetes"), image=IMAGE, job=job
        )
        if job == "trainjob":
            jobs = objects[-2]["spec"]["template"]["spec"]["replicatedJobs"]
            assert [j["template"]["spec"]["backoffLimit"] for j in jobs] == [restarts]
        else:
            assert objects[-1]["spec"]["runPolicy"]["backoffLimit"] == restarts
    deepspeed = resolve(load_preset("cpu-deepspeed").spec, scheduler_name="kubernetes")
    objects = kubernetes_manifests(
        resolve(
            dataclasses.replace(
                deepspeed.spec,
                launch=dataclasses.replace(deepspeed.spec.launch, socket_ifname=None),
            ),
            scheduler_name="kubernetes",
        ),
        image=IMAGE,
    )
    jobs = objects[-2]["spec"]["template"]["spec"]["replicatedJobs"]
    assert [j["template"]["spec"]["backoffLimit"] for j in jobs] == [0, 0]  # node, launcher


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


SECRETS_YAML_QUOTES = (
    "#hf'K8S: y",
    'a"b\\c: d',
    "tab\there: 1",
    "- dash first",
    "y",
    "1e-4 secret",
    "ends with space ",
    "\u00e9t\u00e9 \u2603 token",
    "it's $(here)",
)


@pytest.mark.parametrize("launcher", ["torchrun", "deepspeed"])
@pytest.mark.parametrize("secret", SECRETS_YAML_QUOTES)
def test_a_secret_quoted_by_yaml_or_the_shell_is_still_found(launcher: str, secret: str) -> None:
    """The check reads the values back as a YAML reader gets them, and looks for the
    shell's quoting of the value too: quoting never hides a secret."""
    if len(secret) < 4:
        secret = f"{secret}-long-enough"
    resolved = _resolved(
        "cpu-deepspeed", launcher=launcher, env={"HF_TOKEN": secret}, args=("--t", secret)
    )
    with pytest.raises(SpecError) as caught:
        kubernetes_manifests(resolved, image=IMAGE)
    assert caught.value.problems[0].path == "launch.env.HF_TOKEN"
    assert secret not in str(caught.value)


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


def test_a_64_node_spec_renders_every_node() -> None:
    """Every node in the hostfile and the job (its time is bench/ figures', not a test's)."""
    spec = _spec(
        "name: big\n"
        "image: {accelerator: cpu, torch: '2.11.0', deepspeed: '0.18.0', fabric: infiniband}\n"
        "launch: {launcher: deepspeed, nodes: ['gpu[001-064]'], slots: 8,"
        " kubernetes: {host_network: true}}\n"
    )
    resolved = resolve(spec, scheduler_name="kubernetes")
    objects = kubernetes_manifests(resolved, image=IMAGE)
    assert manifests_yaml(objects).count("slots=8") == 64
    assert objects[-1]["spec"]["trainer"]["numNodes"] == 64
    assert objects[0]["data"]["hostfile"].count("slots=8") == 64


# --- preflight as the run's TrainJob -----------------------------------------------------


def _preflight(preset: str, *extra: str) -> Any:
    args = ["preflight", "--preset", preset, "--scheduler", "kubernetes", *extra]
    return CliRunner().invoke(app, args)


def _pod_specs(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    runtime = next(o for o in objects if o["kind"] == "TrainingRuntime")
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return [job["template"]["spec"]["template"]["spec"] for job in jobs]


@pytest.mark.parametrize("preset", ["cuda-torchrun", "cuda-deepspeed"])
def test_preflight_is_the_runs_trainjob_with_the_probe_as_its_script(
    preset: str, tmp_path: Path
) -> None:
    out = tmp_path / "preflight.yaml"
    result = _preflight(preset, "--dry-run", "--quick", "-o", str(out))
    assert result.exit_code == 0, result.output
    probe = list(yaml.safe_load_all(out.read_text()))
    run = kubernetes_manifests(_resolved(preset), image=probe[-1]["spec"]["trainer"]["image"])
    name = f"{preset}-preflight"
    scripts = probe[0]
    assert (scripts["kind"], scripts["metadata"]["name"]) == ("ConfigMap", f"{name}-preflight")
    assert set(scripts["data"]) == {"preflight.py", "preflight_devices.py", "collect.py"}
    # every pod (the launcher's and the nodes') reads the probe at the same path
    for pod in _pod_specs(probe):
        volume = next(v for v in pod["volumes"] if v["name"] == "preflight")
        assert volume["configMap"]["name"] == f"{name}-preflight"
        for container in pod["containers"]:
            assert {
                "name": "preflight",
                "mountPath": "/etc/builder/preflight",
                "readOnly": True,
            } in (container["volumeMounts"])
    trainer, run_trainer = probe[-1]["spec"]["trainer"], run[-1]["spec"]["trainer"]
    assert "/etc/builder/preflight/preflight.py" in trainer["args"]
    assert "train.py" not in trainer["args"]
    assert "--quick" in trainer["args"]
    # the run's image, resources, node count, environment and claims
    for key in ("image", "numNodes", "numProcPerNode", "resourcesPerNode"):
        assert trainer.get(key) == run_trainer.get(key), key
    assert {e["name"] for e in trainer["env"]} == {e["name"] for e in run_trainer["env"]}
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for pod in _pod_specs(probe)
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == {f"{preset}-code", f"{preset}-cache"}
    assert "PersistentVolumeClaim" not in _kinds(probe)
    again = tmp_path / "again.yaml"
    assert _preflight(preset, "--dry-run", "--quick", "-o", str(again)).exit_code == 0
    assert again.read_bytes() == out.read_bytes()


def test_the_runs_claims_carry_the_label_that_makes_only_them() -> None:
    objects = kubernetes_manifests(_resolved("cuda-torchrun"), image=IMAGE)
    claims = [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    assert len(claims) == 2
    assert all(c["metadata"]["labels"]["app.kubernetes.io/component"] == "storage" for c in claims)
    others = [o for o in objects if o["kind"] != "PersistentVolumeClaim"]
    assert all("app.kubernetes.io/component" not in o["metadata"]["labels"] for o in others)


@pytest.mark.parametrize(
    ("extra", "code", "named"),
    [
        (("--quick",), 2, "--dry-run"),  # builder runs no kubectl
        (("--dry-run", "--rehearse"), 2, "--rehearse"),
        (("--dry-run", "--cluster-dir", "c"), 2, "--cluster-dir"),
        (("--dry-run", "--from-log", "x.log"), 2, "--from-log"),
        (("--dry-run", "--job", "pytorchjob", "-o", "k.yaml"), 1, "--job"),
    ],
)
def test_preflight_on_kubernetes_refuses_what_does_not_belong(
    extra: tuple[str, ...], code: int, named: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _preflight("cpu-deepspeed", *extra)
    assert result.exit_code == code, result.output
    assert named in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", [("--job", "trainjob"), ("-o", "k.yaml")])
def test_kubernetes_options_without_the_scheduler_are_refused(option: tuple[str, str]) -> None:
    result = CliRunner().invoke(app, ["preflight", "--preset", "cpu-deepspeed", *option])
    assert result.exit_code == 2
    assert "--scheduler kubernetes" in result.output or "slurm, kubernetes" in result.output


def _pods_log(found: list[dict[str, Any]]) -> str:
    # as `kubectl logs --prefix` shows them: the pod and container before each line
    return "".join(
        f"[pod/{r['node']}-x7k2q/node] starting\n[pod/{r['node']}-x7k2q/node] {MARK}"
        + __import__("json").dumps(r)
        + "\n"
        for r in found
    )


def test_from_log_judges_the_pods_logs_as_the_ssh_run_is_judged(tmp_path: Path) -> None:
    from builder import PreflightSettings, kubernetes_expected
    from tests.unit.test_preflight import reports

    want = kubernetes_expected(_resolved("cuda-torchrun"), PreflightSettings())
    assert want.nodes == (
        "cuda-torchrun-preflight-node-0-0.cuda-torchrun-preflight",
        "cuda-torchrun-preflight-node-0-1.cuda-torchrun-preflight",
    )
    found = reports(want)
    log = tmp_path / "probe.log"
    log.write_text(_pods_log(found))
    result = _preflight("cuda-torchrun", "--from-log", str(log))
    assert result.exit_code == 0, result.output
    assert "cuda-torchrun-preflight-node-0-1" in result.stdout
    assert "ok: preflight passed on 2 nodes" in result.output
    log.write_text(_pods_log([r for r in found if r["rank"] < want.slots]))
    result = _preflight("cuda-torchrun", "--from-log", str(log))
    assert result.exit_code != 0
    assert "cuda-torchrun-preflight-node-0-1" in result.output


def test_from_log_of_a_missing_file_is_refused(tmp_path: Path) -> None:
    result = _preflight("cuda-torchrun", "--from-log", str(tmp_path / "none.log"))
    assert result.exit_code == 2
    assert "--from-log" in result.output


def test_from_log_without_the_scheduler_judges_the_ssh_plans_nodes(tmp_path: Path) -> None:
    from builder import ClusterPreflight, PreflightSettings, Ssh
    from tests.unit.test_preflight import output, reports

    resolved = resolve(load_preset("cpu-deepspeed").spec)
    want = ClusterPreflight(
        resolved,
        image="x",
        cluster_dir=tmp_path / "cluster",
        settings=PreflightSettings(),
        ssh=Ssh(None),
    ).expected()
    log = tmp_path / "launch.log"
    log.write_text(output(reports(want)))
    result = CliRunner().invoke(
        app, ["preflight", "--preset", "cpu-deepspeed", "--from-log", str(log), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert '"ok": true' in result.stdout


def test_stack_digest_pins_the_image_of_every_pod(tmp_path: Path) -> None:
    spec = tmp_path / "stack.yaml"
    spec.write_text(preset_text("cuda-torchrun"))
    image = load_preset("cuda-torchrun").spec.image
    reference = f"{image.name}:{image.tag}"
    digest = "sha256:" + "b" * 64
    record = {"schema": PIN_SCHEMA, "reference": reference, "digest": digest}
    (tmp_path / "stack.digest").write_text(json.dumps(record))
    for command in (["kubernetes"], ["preflight", "--scheduler", "kubernetes", "--dry-run"]):
        result = CliRunner().invoke(app, [*command, str(spec), "-o", "-"])
        assert result.exit_code == 0, result.output
        objects = list(yaml.safe_load_all(result.stdout))
        images = {c["image"] for c in _containers(objects)} | {
            objects[-1]["spec"]["trainer"]["image"]
        }
        assert len(images) == 1
        assert images.pop().endswith("@" + digest)


def test_a_launcher_only_slurm_runs_exits_1_naming_it(tmp_path: Path) -> None:
    spec = tmp_path / "stack.yaml"
    spec.write_text(
        "name: t\nimage: {accelerator: cpu, torch: '2.11.0'}\nlaunch: {launcher: srun}\n"
    )
    out = tmp_path / "k.yaml"
    for command in (["kubernetes"], ["preflight", "--scheduler", "kubernetes", "--dry-run"]):
        result = CliRunner().invoke(app, [*command, str(spec), "-o", str(out)])
        assert result.exit_code == 1, result.output
        assert "launch.launcher" in result.output
        assert not out.exists()


# --- what the API server refuses is refused here -----------------------------------------

API_BASE = (
    "name: %s\nimage: {accelerator: cpu, torch: '2.13.0', deepspeed: '0.18.0'}\n"
    "launch: {launcher: %s, nodes: %s, kubernetes: %s}\n"
)


@pytest.mark.parametrize("name", ["7b-train", "'9x'"])
def test_a_name_a_service_cannot_take_is_refused_with_one_it_can(name: str) -> None:
    spec = _spec(API_BASE % (name, "torchrun", "[a, b]", "{}"))
    with pytest.raises(SpecError) as caught:
        kubernetes_manifests(resolve(spec, scheduler_name="kubernetes"), image=IMAGE)
    problem = caught.value.problems[0]
    assert problem.path == "name"
    assert "DNS-1035" in problem.message
    assert f"'run-{name.strip(chr(39))}'" in problem.message


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ("{tolerations: [{operator: Exists, value: x, key: k}]}", "leave value out"),
        ("{tolerations: [{operator: Equal, value: x}]}", "needs a key"),
        ("{tolerations: [{value: x}]}", "needs a key"),
        ("{claim_size: '0'}", "claim_size"),
        ("{claim_size: 0Gi}", "claim_size"),
        ("{shm_size: '0'}", "shm_size"),
    ],
)
def test_options_the_api_server_refuses_are_spec_errors(options: str, said: str) -> None:
    with pytest.raises(SpecError) as caught:
        _spec(API_BASE % ("t", "torchrun", "[a, b]", options))
    assert said in str(caught.value)


def test_deepspeed_on_one_node_is_refused_not_written_as_two() -> None:
    spec = _spec(API_BASE % ("t", "deepspeed", "[a]", "{}"))
    with pytest.raises(SpecError, match="one node would still be written as two"):
        kubernetes_manifests(resolve(spec, scheduler_name="kubernetes"), image=IMAGE)


def test_a_config_map_over_the_api_servers_limit_is_refused() -> None:
    spec = _spec(API_BASE % ("large-training-run", "deepspeed", "['n[00001-20000]']", "{}"))
    with pytest.raises(SpecError, match="above the 1,048,576 the API server takes"):
        kubernetes_manifests(resolve(spec, scheduler_name="kubernetes"), image=IMAGE)


def test_efa_asks_for_the_count_the_spec_gives() -> None:
    """A p5 node has 32 EFA devices, a p4d 4: one would carry a fraction of the traffic."""
    spec = load_preset("cuda-torchrun").spec
    image = dataclasses.replace(spec.image, fabric="efa")
    spec = dataclasses.replace(spec, image=image)
    with pytest.raises(SpecError, match=r"p5\.48xlarge 32"):
        kubernetes_manifests(resolve(spec, scheduler_name="kubernetes"), image=IMAGE)
    section = dataclasses.replace(spec.launch.section(Kubernetes), fabric_devices=32)
    spec = dataclasses.replace(spec, launch=spec.launch.with_section(section))
    objects = kubernetes_manifests(resolve(spec, scheduler_name="kubernetes"), image=IMAGE)
    job = next(o for o in objects if o["kind"] == "TrainJob")
    assert job["spec"]["trainer"]["resourcesPerNode"]["limits"]["vpc.amazonaws.com/efa"] == "32"

"""Several CPU architectures for real: one stack built by builder for linux/amd64 and,
under qemu (binfmt_misc), linux/arm64 through the engine; the arm64 image runs aarch64
torch and DeepSpeed; both go up to a real registry (Debian's docker-registry) as one
tag, a manifest list, and each comes back by the list's digest for its platform; the
arm64 image passes a 2-node torchrun rehearsal under emulation; `builder diff` names
the architecture as what differs."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from typer.testing import CliRunner

from builder.architectures import AMD64, ARM64
from builder.cli.app import app
from builder.engine.push import pull_image
from builder.model import dump
from builder.rehearse.run import rehearse
from builder.spec.loader import load_stack
from tests.integration.conftest import run_in
from tests.integration.multiarch import ARM64_TORCH, PLATFORMS, multi_stack
from tests.integration.test_registry import serve

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from builder.engine import DockerEngine
    from builder.engine.build import Built

pytestmark = pytest.mark.integration


@pytest.fixture
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An empty registry of its own (Debian's docker-registry on a free port)."""
    daemon, address = serve(tmp_path_factory.mktemp("registry"), auth=False)
    yield address
    daemon.stop()


AMD, ARM = AMD64.platform, ARM64.platform
CHECK = (
    "uname -m; /opt/venv/bin/python -c "
    "'import platform, torch, deepspeed; "
    'print("CHECK", platform.machine(), torch.__version__, deepspeed.__version__)\''
)


def checked(engine: DockerEngine, image: str) -> list[str]:
    """uname -m, then Python's machine, torch's and DeepSpeed's versions, in image (what
    DeepSpeed logs as it loads is left out)."""
    out = run_in(engine, image, CHECK).splitlines()
    line = next(line for line in out if line.startswith("CHECK "))
    return [out[0].strip(), *line.split()[1:]]


def test_each_architecture_is_built_and_runs_its_own_torch(
    engine: DockerEngine, multi_image: Built
) -> None:
    assert list(multi_image.results) == list(PLATFORMS)
    arm, amd = multi_image.results[ARM], multi_image.results[AMD]
    assert (amd.reference, arm.reference) == (
        f"{multi_image.reference}-amd64",
        f"{multi_image.reference}-arm64",
    )
    assert engine.image(arm.reference).architecture == "arm64"
    assert engine.image(amd.reference).architecture == "amd64"
    assert engine.image(multi_image.reference).id == amd.image_id  # this machine's
    arm_torch = f"{ARM64_TORCH}+cpu"  # (PyPI's CPU aarch64 wheel says so itself)
    assert checked(engine, arm.reference) == ["aarch64", "aarch64", arm_torch, "0.19.8"]
    assert checked(engine, amd.reference) == ["x86_64", "x86_64", "2.13.0+cpu", "0.19.8"]
    shown = CliRunner().invoke(app, ["inspect", arm.reference, "--json"])
    assert json.loads(shown.stdout)["result"]["platform"] == ARM


def test_diff_names_the_architecture(multi_image: Built) -> None:
    arm, amd = multi_image.results[ARM], multi_image.results[AMD]
    result = CliRunner().invoke(app, ["diff", amd.reference, arm.reference, "--json"])
    assert result.exit_code == 13, result.output
    differences = json.loads(result.stdout)["result"]["differences"]
    assert differences["arch"] == ["x86_64", "aarch64"]


def test_both_go_up_as_one_tag_and_each_comes_back_by_the_lists_digest(
    engine: DockerEngine,
    multi_image: Built,
    registry: str,
    tmp_path: Path,
) -> None:
    name = f"{registry}/builder-test/multi"
    remote = {p: f"{name}:it{a.tag_suffix}" for p, a in ((AMD, AMD64), (ARM, ARM64))}
    for platform, reference in remote.items():
        engine.tag(multi_image.results[platform].image_id, reference)
    engine.tag(multi_image.primary.image_id, f"{name}:it")
    try:
        # the user's way: the stack names the registry, `builder push` sends both
        data = _spec_data()
        data["image"].update(name=name, tag="it")
        stack = tmp_path / "stack.yaml"
        stack.write_text(yaml.safe_dump(data))
        loaded = load_stack(stack, None).spec
        assert loaded.image.platforms == PLATFORMS
        assert loaded.image == replace(multi_stack().spec.image, name=name)
        runner = CliRunner()
        result = runner.invoke(app, ["push", str(stack), "--json"])
        assert result.exit_code == 0, result.output
        pushed = json.loads(result.stdout)["result"]
        assert set(pushed["platform_digests"]) == {AMD, ARM}
        assert pushed["pinned"] == f"{name}@{pushed['digest']}"
        record = json.loads((tmp_path / "stack.digest").read_text())
        assert record["platforms"] == pushed["platform_digests"]
        # the registry holds a manifest list naming each architecture's image
        listed = _manifest(registry, pushed["digest"])
        assert listed["mediaType"].endswith("manifest.list.v2+json")
        assert {
            f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"]
            for m in listed["manifests"]
        } == pushed["platform_digests"]
        # every plan names the list's digest: each node's engine pulls its own image
        plan = json.loads(runner.invoke(app, ["launch", str(stack), "--json"]).stdout)["result"]
        runs = [
            " ".join(s["argv"]) for s in plan["commands"] if "docker run" in " ".join(s["argv"])
        ]
        assert runs
        assert all(pushed["pinned"] in argv for argv in runs)
        # a node of each architecture: nothing but the list's digest, and its platform
        for reference in [*remote.values(), f"{name}:it"]:
            engine.remove_image(reference, force=False, prune=False)
        for platform in (ARM, AMD):
            pull_image(engine, pushed["pinned"], platform=platform)
            got = engine.image(pushed["pinned"])
            assert got.id == multi_image.results[platform].image_id
            assert f"linux/{got.architecture}" == platform
            # one engine holds one image per name@digest: the next "node" starts clean
            engine.remove_image(pushed["pinned"], force=False, prune=False)
    finally:
        for reference in [*remote.values(), f"{name}:it"]:
            if engine.exists(reference):
                engine.remove_image(reference, force=False, prune=False)
        for digest_reference in [f"{name}@{d}" for d in _pushed_digests(tmp_path)]:
            if engine.exists(digest_reference):
                engine.remove_image(digest_reference, force=False, prune=False)


def test_a_two_node_torchrun_rehearsal_of_the_arm64_image_passes_under_emulation(
    engine: DockerEngine, multi_image: Built
) -> None:
    spec = multi_stack().spec
    arm = multi_image.results[ARM].reference
    outcome = rehearse(spec, image=arm, engine=engine, nodes=2, launcher="torchrun")
    assert outcome.ok, [fault.text() for fault in outcome.faults]
    world = 2 * spec.launch.slots
    assert [row.rank for row in outcome.rows] == list(range(world))
    assert {row.sum for row in outcome.rows} == {world * (world + 1) / 2}


def _spec_data() -> dict[str, Any]:
    """The multi-architecture stack as a stack.yaml holds it."""
    data: dict[str, Any] = dump(multi_stack().spec)
    return data


def _manifest(registry: str, digest: str) -> dict[str, Any]:
    accept = ", ".join(
        (
            "application/vnd.docker.distribution.manifest.list.v2+json",
            "application/vnd.oci.image.index.v1+json",
        )
    )
    repository = "builder-test/multi"
    request = urllib.request.Request(
        f"http://{registry}/v2/{repository}/manifests/{digest}", headers={"Accept": accept}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return dict(json.loads(answer.read()))


def _pushed_digests(folder: Path) -> list[str]:
    record = folder / "stack.digest"
    if not record.is_file():
        return []
    data = json.loads(record.read_text())
    return [data["digest"], *data.get("platforms", {}).values()]

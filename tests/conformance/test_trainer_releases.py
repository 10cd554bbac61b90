"""Every Kubeflow Trainer release builder writes for (launch.kubernetes.trainer) accepts the
TrainJobs builder writes for it, held to that release's own published models
(kubeflow-trainer-api at the release, installed apart and read in a process of its own):
v2.0 (podSpecOverrides), v2.1 (podTemplateOverrides), v2.2 and later (runtimePatches).
What a release's patch cannot carry is refused, never dropped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import builder
from tests.conformance.test_kubernetes import EVERY_OPTION, IMAGE, SITE_CLAIMS
from tests.conftest import unavailable

RELEASES = {"2.0": "2.0.1", "2.1": "2.1.0", "2.2": "2.2.1"}
"""launch.kubernetes.trainer -> the kubeflow-trainer-api release whose models check it
(2.3.0, the test venv's own, checks 2.2's in test_kubernetes)."""
CACHE = Path(os.environ.get("BUILDER_TEST_CACHE", Path.home() / ".cache/builder-tests"))
REPO = Path(__file__).resolve().parents[2]

CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])
import kubeflow_trainer_api
from tests.conformance.k8s_models import check
assert kubeflow_trainer_api.__file__.startswith(sys.argv[1]), kubeflow_trainer_api.__file__
failures = []
for obj in json.load(sys.stdin):
    try:
        check(obj)
    except AssertionError as exc:
        failures.append(f"{obj['kind']} {obj['metadata']['name']}: {exc}")
print(json.dumps(failures))
"""


def models_of(version: str) -> Path:
    """kubeflow-trainer-api at version, installed apart (once, kept in the test cache)."""
    target = CACHE / f"kubeflow-trainer-api-{version}"
    if not (target / "kubeflow_trainer_api").is_dir():
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(target),
                f"kubeflow-trainer-api=={version}",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        if result.returncode != 0:
            unavailable(f"kubeflow-trainer-api {version} could not be installed: {result.stderr}")
    return target


def trainer_objects(
    release: str, options: dict[str, Any], launcher: str, fabric: str = "none"
) -> list[Any]:
    data = yaml.safe_load(builder.preset_text("cuda-deepspeed"))
    data["image"]["fabric"] = fabric
    data["launch"]["launcher"] = launcher
    data["launch"]["code"] = "/shared/project"
    data["launch"]["kubernetes"] = {**options, "trainer": release}
    stack = builder.parse_spec(yaml.safe_dump(data), f"trainer {release}")
    resolved = builder.resolve(stack, scheduler_name="kubernetes")
    objects = builder.kubernetes_manifests(resolved, image=IMAGE)
    return [o for o in objects if o["apiVersion"].startswith("trainer.kubeflow.org/")]


def judged(version: str, objects: list[Any]) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", CHECK, str(models_of(version))],
        input=json.dumps(objects),
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout))


SITE_ONLY = {"runtime": "torch-distributed", "code_claim": "team-code"}
"""A site's runtime and claim, no more: every release's patch carries it."""


@pytest.mark.parametrize("launcher", ["torchrun", "deepspeed"])
@pytest.mark.parametrize("release", sorted(RELEASES))
def test_each_release_accepts_the_trainjob_builder_writes_for_it(
    release: str, launcher: str
) -> None:
    objects = trainer_objects(release, SITE_ONLY, launcher)
    job = next(o for o in objects if o["kind"] == "TrainJob")
    field = {"2.0": "podSpecOverrides", "2.1": "podTemplateOverrides", "2.2": "runtimePatches"}
    assert set(job["spec"]) & set(field.values()) == {field[release]}
    assert judged(RELEASES[release], objects) == []
    # and the release's models are what decide: another release's field is refused there
    other = next(r for r in sorted(RELEASES) if r != release)
    assert judged(RELEASES[other], objects), f"{other}'s models took {release}'s TrainJob"


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_every_option_a_release_can_carry_passes_and_the_rest_is_refused(release: str) -> None:
    options = {**EVERY_OPTION, **SITE_CLAIMS}
    if release == "2.2":
        objects = trainer_objects(release, options, "torchrun", "infiniband")
        assert judged(RELEASES[release], objects) == []
        return
    with pytest.raises(builder.SpecError, match=r"launch\.kubernetes\.trainer") as caught:
        trainer_objects(release, options, "torchrun", "infiniband")
    said = str(caught.value)
    assert "securityContext" in said  # the RDMA device's IPC_LOCK
    if release == "2.0":
        assert "annotations" in said
        assert "imagePullSecrets" in said
    carried = {
        key: value
        for key, value in options.items()
        if key not in ("rdma_resource", "fabric_devices", "network", "image_pull_secrets")
    }
    assert judged(RELEASES[release], trainer_objects(release, carried, "torchrun")) == []

"""Real Docker engine fixtures. Under BUILDER_REQUIRE_REAL=1 (CI) a missing engine,
base image or wheel fails the tests; elsewhere they skip with how to get them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.contract import REHEARSAL_LABEL as LABEL
from builder.errors import EngineUnavailable
from builder.image.inputs import BuildInputs, load_inputs
from builder.rehearse.slurm import BASE_LABEL as SLURM_BASE_LABEL
from builder.spec.loader import load_preset
from tests.conftest import unavailable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from builder.engine import DockerEngine, Engine
    from builder.engine.build import BuildResult
    from builder.rehearse.run import Rehearsal
    from builder.rehearse.session import Outcome

BASE_IMAGE = os.environ.get("BUILDER_TEST_BASE", "builder-test/bookworm:latest")
CA_BUNDLE = Path(os.environ.get("BUILDER_TEST_CA", "/etc/ssl/certs/ca-certificates.crt"))
TORCH = "2.13.0"
IMAGE = "builder-test/cpu-deepspeed:it"
OPENMPI_IMAGE = "builder-test/cpu-openmpi:it"
# Kept between sessions as the build cache; every other image a session makes is removed.
KEEP = (BASE_IMAGE, IMAGE, OPENMPI_IMAGE)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def engine() -> DockerEngine:
    from builder.engine import connect

    try:
        return connect()
    except EngineUnavailable as exc:
        unavailable(f"{exc} (scripts/engine.sh starts one)")
        raise


# Short ids of every step image of the KEEP builds: their non-final stages (the python
# stage) end in untagged images that are the cache of the next session's builds.
KEPT_STEPS: set[str] = set()


def keep(result: BuildResult) -> BuildResult:
    """Mark a build of a KEEP reference as cache to keep, stages and all."""
    KEPT_STEPS.update(step.image for step in result.steps if step.image)
    return result


@pytest.fixture(scope="session", autouse=True)
def no_images_left() -> Iterator[None]:
    """The suite leaves only KEEP, the stages of their builds, and Slurm images derived
    from them. A run needs about 8 GB while it runs.

    An image is the suite's when it appeared during the session, or when it had a
    builder-test/ reference before and has none now (a rebuild moved the tag). With
    BUILDER_TEST_PRUNE=1 (CI, whose engine is its own) every other untagged image
    goes too: what earlier runs, killed or older, left behind.
    """
    from builder.engine import connect

    try:
        engine = connect()
    except EngineUnavailable:
        yield
        return
    before = engine.images()
    yield
    prune = os.environ.get("BUILDER_TEST_PRUNE") == "1"
    kept = {i for i, (refs, _) in engine.images().items() if set(refs) & set(KEEP)}

    def removable(image_id: str, refs: tuple[str, ...], labels: dict[str, str]) -> bool:
        if (
            image_id in kept
            or image_id.removeprefix("sha256:")[:12] in KEPT_STEPS
            or labels.get(SLURM_BASE_LABEL) in kept
        ):
            return False
        if image_id not in before:
            return True
        was_a_test_image = any(ref.startswith("builder-test/") for ref in before[image_id][0])
        return not refs and (prune or was_a_test_image)

    # no parents with an image: the parent of a removed leaf can be a kept stage (the
    # python stage of IMAGE, under a variant's); each parent is judged in the next round
    while found := [i for i, entry in engine.images().items() if removable(i, *entry)]:
        removed = [engine.remove_image(image_id, prune=False) for image_id in found]
        if not any(removed):
            break
    engine.close()


@pytest.fixture(scope="session")
def base_image(engine: Engine) -> str:
    if not engine.exists(BASE_IMAGE):
        unavailable(f"base image {BASE_IMAGE} is missing: run scripts/base-image.sh")
    return BASE_IMAGE


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    """A folder holding the CPU torch wheel (pip finds it on these machines offline)."""
    folder = Path(
        os.environ.get("BUILDER_TEST_WHEELHOUSE", Path.home() / ".cache/builder-tests/wheels")
    )
    if not list(folder.glob(f"torch-{TORCH}*.whl")):
        folder.mkdir(parents=True, exist_ok=True)
        # --no-index: only local find-links (PIP_FIND_LINKS on our machines); PyPI's
        # Linux torch is the multi-GB CUDA build and must never be fetched here.
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-index",
                "-d",
                str(folder),
                f"torch=={TORCH}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        cpu = [p for p in folder.glob(f"torch-{TORCH}*.whl") if "+cpu" in p.name]
        if not cpu:
            unavailable(
                f"no CPU torch {TORCH} wheel for the wheelhouse ({result.stderr.strip()[-200:]}); "
                "put one in BUILDER_TEST_WHEELHOUSE or make pip find it (PIP_FIND_LINKS)"
            )
    return folder


@pytest.fixture(scope="session")
def inputs(base_image: str, wheelhouse: Path) -> BuildInputs:
    if not CA_BUNDLE.is_file():
        unavailable(f"no CA bundle at {CA_BUNDLE}")
    return load_inputs(base_image=base_image, ca_bundle=CA_BUNDLE, wheelhouse=wheelhouse)


@pytest.fixture(scope="session")
def cpu_image(engine: Engine, inputs: BuildInputs) -> BuildResult:
    """The cpu-deepspeed preset, built for real once per session."""
    from builder.engine.build import build_image
    from builder.engine.progress import PlainProgress

    with open(os.devnull, "w") as sink:  # noqa: PTH123 - a text sink for the progress lines
        return keep(
            build_image(
                load_preset("cpu-deepspeed"),
                inputs,
                reference=IMAGE,
                engine=engine,
                progress=PlainProgress(
                    sys.stderr if os.environ.get("BUILDER_TEST_VERBOSE") else sink
                ),
            )
        )


def run_in(engine: Engine, image: str, script: str) -> str:
    """Output of a bash script run in a fresh container of image (entrypoint bypassed)."""
    return engine.run(image, ["-c", script], entrypoint=["/bin/bash"])


def saved_layers(engine: Engine, image: str) -> Iterator[tuple[str, tarfile.TarFile]]:
    """Every layer of the image as `docker save` exports it, bottom first."""
    with tempfile.TemporaryFile() as spool:
        for chunk in engine.save(image):
            spool.write(chunk)
        spool.seek(0)
        with tarfile.open(fileobj=spool) as outer:
            manifest_file = outer.extractfile("manifest.json")
            assert manifest_file is not None
            (manifest,) = json.load(manifest_file)
            for name in manifest["Layers"]:
                member = outer.extractfile(name)
                assert member is not None
                with tarfile.open(fileobj=member) as layer:
                    yield name, layer


@pytest.fixture(scope="session")
def other_einops(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real wheel of einops at another version than the image's."""
    folder = tmp_path_factory.mktemp("einops")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder),
         "einops==0.8.1"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    wheels = list(folder.glob("einops-0.8.1-*.whl"))
    if not wheels:
        unavailable(f"cannot download einops 0.8.1: {result.stderr.strip()[-300:]}")
    return wheels[0]


def leftovers(engine: DockerEngine) -> tuple[list[str], list[str], int]:
    """The rehearsals' containers and networks, and how many volumes the engine has."""
    client = engine._client
    containers = [str(c.name) for c in client.containers.list(all=True, filters={"label": LABEL})]
    networks = [str(n.name) for n in client.networks.list() if str(n.name).startswith("rehearse-")]
    return containers, networks, len(client.volumes.list())


@pytest.fixture
def clean(engine: DockerEngine, cpu_image: BuildResult) -> Iterator[None]:
    """Every rehearsal test leaves the engine as it found it."""
    before = leftovers(engine)
    yield
    assert leftovers(engine) == ([], [], before[2])


def run(nodes: int, launcher: str, **options: object) -> Outcome:
    """A rehearsal of the cpu-deepspeed preset on the built image (IMAGE)."""
    from builder.engine import connect
    from builder.rehearse.run import rehearse

    return rehearse(
        load_preset("cpu-deepspeed").spec,
        image=IMAGE,
        engine=connect(),
        nodes=nodes,
        launcher=launcher,
        **options,  # type: ignore[arg-type]
    )


def run_between(
    nodes: int, launcher: str, between: Callable[[Rehearsal], None], **options: object
) -> Outcome:
    """The same rehearsal in its two phases, with `between` acting on the nodes once they
    are up and before the job runs (a fault injected for real)."""
    from builder.engine import connect
    from builder.rehearse.run import Rehearsal

    with Rehearsal(
        load_preset("cpu-deepspeed").spec,
        image=IMAGE,
        engine=connect(),
        nodes=nodes,
        launcher=launcher,
        **options,  # type: ignore[arg-type]
    ) as rehearsal:
        rehearsal.up()
        if rehearsal.outcome.ok:
            between(rehearsal)
        return rehearsal.job()

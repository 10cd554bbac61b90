"""Real Docker engine fixtures. Under BUILDER_REQUIRE_REAL=1 (CI) a missing engine,
base image or wheel fails the tests; elsewhere they skip with how to get them."""

from __future__ import annotations

import ast
import functools
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.contract import REHEARSAL_LABEL as LABEL
from builder.errors import EngineUnavailable
from builder.rehearse.run import rehearsal_of
from builder.rehearse.slurm import BASE_LABEL as SLURM_BASE_LABEL
from builder.spec.loader import load_preset
from tests.conftest import QUIET, run_script, unavailable
from tests.integration import multiarch
from tests.integration.images import (
    ARM64_BASE,
    BASE_IMAGE,
    CA_BUNDLE,
    FABRIC_IMAGE,
    IMAGE,
    KEEP,
    MULTI_IMAGE,
    OPENMPI_IMAGE,
    PREBUILT,
    TORCH,
    WHEELHOUSE,
    Prebuild,
    build_shared,
    cpu_wheels,
    suite_inputs,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from builder.engine import DockerEngine, Engine
    from builder.engine.build import BuildResult, Built
    from builder.image.inputs import BuildInputs
    from builder.rehearse.run import Rehearsal
    from builder.rehearse.session import Outcome

pytestmark = pytest.mark.integration

PREBUILD = pytest.StashKey[Prebuild]()

# Every image constant and the fixture that makes it when it is missing. A test that
# names one (itself, through a fixture, or through a helper of the suite) must ask for
# its fixture: on a fresh machine nothing else makes it, and in another order of the
# tests an image another test happened to build is not there yet.
IMAGE_FIXTURES = {
    BASE_IMAGE: "base_image",
    IMAGE: "cpu_image",
    OPENMPI_IMAGE: "openmpi_image",
    FABRIC_IMAGE: "fabric_image",
    ARM64_BASE: "arm64_base",
    MULTI_IMAGE: "multi_image",
}


@functools.cache
def images_named(thing: Callable[..., object]) -> frozenset[str]:
    """The image constants a function or class of the suite names, itself or through the
    suite's own helpers it refers to."""
    module = sys.modules[getattr(thing, "__module__", "")]
    tree = ast.parse(textwrap.dedent(inspect.getsource(thing)))
    named: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name):
            continue
        value = vars(module).get(node.id)
        if isinstance(value, str) and value in IMAGE_FIXTURES:
            named.add(value)
        elif (inspect.isfunction(value) or inspect.isclass(value)) and value is not thing:
            helper: Callable[..., object] = value
            if helper.__module__.startswith("tests."):
                named |= images_named(helper)
    return frozenset(named)


def missing_image_fixtures(item: pytest.Function) -> list[str]:
    """The fixtures of the images item names that it does not ask for."""
    definitions = item._fixtureinfo.name2fixturedefs.values()
    functions = [item.function, *(defs[-1].func for defs in definitions)]
    named = frozenset().union(*(images_named(function) for function in functions))
    return sorted({IMAGE_FIXTURES[image] for image in named} - set(item.fixturenames))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Fail the run before it starts when a test uses an image it does not ask for; then
    put the integration tests in the prebuild's order (``in_prebuild_order``)."""
    problems = [
        f"{item.nodeid} uses the image of {', '.join(missing)} without asking for it"
        for item in items
        if isinstance(item, pytest.Function)
        and item.get_closest_marker("integration")
        and (missing := missing_image_fixtures(item))
    ]
    if problems:
        raise pytest.UsageError(
            "tests that name a test image must ask for the fixture that makes it (add it "
            "as a parameter or with @pytest.mark.usefixtures):\n  " + "\n  ".join(problems)
        )
    in_prebuild_order(items)


def in_prebuild_order(items: list[pytest.Item]) -> None:
    """Among the integration tests (after tests/conftest.py put them after the engine-free
    ones, the rate-judging ones last), those whose shared image the prebuild makes first
    run first: a test that needs a later image (the fabric's, the multi-architecture
    stack) comes when its build is near its end, not while three others are still ahead
    of it (a fresh run sat 438 s behind the fabric image's build, and 407 s behind the
    arm64 one's). Random order stays within each group."""
    rank = {IMAGE_FIXTURES[reference]: index for index, reference in enumerate(PREBUILT)}

    def needs(item: pytest.Item) -> int:
        names = getattr(item, "fixturenames", ())
        return max((rank[name] for name in names if name in rank), default=-1)

    items.sort(
        key=lambda item: (
            item.get_closest_marker("integration") is not None,
            QUIET in getattr(item, "fixturenames", ()),
            needs(item) if item.get_closest_marker("integration") else 0,
        )
    )


@pytest.fixture(scope="session")
def engine() -> DockerEngine:
    """The machine's Docker engine; scripts/engine.sh starts one when none answers."""
    from builder.engine import connect

    try:
        return connect()
    except EngineUnavailable:
        problem = run_script("engine.sh")
    try:
        return connect()
    except EngineUnavailable as exc:
        unavailable(f"{exc}, and scripts/engine.sh could not start one: {problem}")
        raise


@pytest.fixture(scope="session")
def prebuild(request: pytest.FixtureRequest) -> Prebuild | None:
    """The build of the shared images that began with the run, if one did."""
    return request.config.stash.get(PREBUILD, None)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start building the shared images the selected tests ask for, at once: they build
    while the engine-free tests, which run first, take their turn."""
    asked = {name for item in session.items for name in getattr(item, "fixturenames", ())}
    wanted = [reference for reference in PREBUILT if IMAGE_FIXTURES[reference] in asked]
    if (
        not wanted
        or session.config.option.collectonly
        or os.environ.get("BUILDER_TEST_PREBUILD") == "0"
    ):
        return
    folder = Path(tempfile.mkdtemp(prefix="builder-prebuild-"))
    session.config.stash[PREBUILD] = Prebuild.start(folder, wanted)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The prebuild is stopped if it still runs; its log is shown when it crashed or a
    build in it failed (the fixture then built that image itself, and failed or not
    there)."""
    prebuild = session.config.stash.get(PREBUILD, None)
    if prebuild is None:
        return
    prebuild.stop()
    timings = prebuild.timings()
    if timings:  # where a fresh run's time goes, for whoever tunes it
        sys.stderr.write("\nthe shared images' prebuild:\n" + "\n".join(timings) + "\n")
    log = prebuild.folder / "prebuild.log"
    crashed = prebuild.process.returncode not in (0, -signal.SIGTERM)
    if (crashed or list(prebuild.folder.glob("*.failed"))) and log.exists():
        sys.stderr.write(f"\nthe shared images' prebuild:\n{log.read_text()[-4000:]}\n")
    shutil.rmtree(prebuild.folder, ignore_errors=True)


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
    from them. A run needs about 15 GB while it runs (10 GB of kept images after it).

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
    """The local Debian base (no registry here); scripts/base-image.sh makes it."""
    if not engine.exists(BASE_IMAGE):
        problem = run_script("base-image.sh", BASE_IMAGE)
        if problem is not None or not engine.exists(BASE_IMAGE):
            unavailable(
                f"base image {BASE_IMAGE} is missing and scripts/base-image.sh "
                f"could not make it: {problem}"
            )
    return BASE_IMAGE


@pytest.fixture(scope="session")
def emulation() -> None:
    """arm64 binaries run here, in containers too (qemu with binfmt_misc's F flag)."""
    problem = run_script("emulation.sh", "arm64")
    if problem is not None:
        unavailable(f"arm64 emulation could not be set up (scripts/emulation.sh): {problem}")


@pytest.fixture(scope="session")
def arm64_base(engine: Engine, emulation: None) -> str:
    """The arm64 Debian base: scripts/base-image.sh's debootstrap, for arm64 (about a
    minute and a half under qemu)."""
    del emulation
    if not engine.exists(ARM64_BASE):
        problem = run_script("base-image.sh", ARM64_BASE, env={"BUILDER_BASE_ARCH": "arm64"})
        if problem is not None or not engine.exists(ARM64_BASE):
            unavailable(
                f"{ARM64_BASE} is missing and scripts/base-image.sh could not make it: {problem}"
            )
    return ARM64_BASE


@pytest.fixture(scope="session")
def multi_image(
    engine: Engine, base_image: str, arm64_base: str, wheelhouse: Path, prebuild: Prebuild | None
) -> Built:
    """The cpu-deepspeed stack for linux/amd64 and linux/arm64 (tests/integration/
    multiarch.py), built once per session: name:tag-amd64, name:tag-arm64. The prebuild
    makes it first where one runs: this build then finds every layer cached."""
    del base_image, arm64_base, wheelhouse
    if prebuild is not None:
        prebuild.wait(MULTI_IMAGE)
    try:
        built = multiarch.prepare_and_build(engine)
    except RuntimeError as exc:
        unavailable(str(exc))
        raise
    for result in built.results.values():
        keep(result)
    return built


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    """A folder holding the CPU torch wheel; scripts/wheelhouse.sh fills it."""
    if not cpu_wheels():
        problem = run_script("wheelhouse.sh", str(WHEELHOUSE))
        if not cpu_wheels():
            unavailable(f"no CPU torch {TORCH} wheel in {WHEELHOUSE}: {problem}")
    return WHEELHOUSE


@pytest.fixture(scope="session")
def inputs(base_image: str, wheelhouse: Path) -> BuildInputs:
    if not CA_BUNDLE.is_file():
        unavailable(f"no CA bundle at {CA_BUNDLE}")
    return suite_inputs(wheelhouse)


@pytest.fixture(scope="session")
def cpu_image(engine: Engine, inputs: BuildInputs, prebuild: Prebuild | None) -> BuildResult:
    """The cpu-deepspeed preset, built for real once per session."""
    return keep(shared_image(IMAGE, engine, inputs, prebuild))


@pytest.fixture(scope="session")
def openmpi_image(engine: Engine, inputs: BuildInputs, prebuild: Prebuild | None) -> str:
    """cpu-deepspeed with OpenMPI (images.openmpi_stack), built for real once per session."""
    return keep(shared_image(OPENMPI_IMAGE, engine, inputs, prebuild)).reference


@pytest.fixture(scope="session")
def fabric_image(engine: Engine, inputs: BuildInputs, prebuild: Prebuild | None) -> str:
    """image.fabric: infiniband (images.fabric_stack), built for real once per session."""
    return keep(shared_image(FABRIC_IMAGE, engine, inputs, prebuild)).reference


@pytest.fixture
def quiet_machine(prebuild: Prebuild | None) -> None:
    """For tests that judge rates: the shared images' builds have ended, so none runs
    beside the test and skews what it measures."""
    if prebuild is not None:
        prebuild.finish()


def shared_image(
    reference: str, engine: Engine, inputs: BuildInputs, prebuild: Prebuild | None
) -> BuildResult:
    """A shared image: once the prebuild is done with it, every layer is cached."""
    if prebuild is not None:
        prebuild.wait(reference)
    return build_shared(reference, inputs, engine)


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
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "-q",
            "-d",
            str(folder),
            "einops==0.8.1",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    wheels = list(folder.glob("einops-0.8.1-*.whl"))
    if not wheels:
        unavailable(f"cannot download einops 0.8.1: {result.stderr.strip()[-300:]}")
    return wheels[0]


def install_wheel(container: str, wheel: Path) -> None:
    """pip install wheel (no dependencies) in a running node's container: its packages
    drift from the other nodes', for real."""
    inside = f"/tmp/{wheel.name}"
    subprocess.run(["docker", "cp", str(wheel), f"{container}:{inside}"], check=True)
    subprocess.run(
        ["docker", "exec", container, "pip", "install", "-q", "--no-deps", inside],
        check=True,
        capture_output=True,
    )


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
        rehearsal_of(load_preset("cpu-deepspeed").spec, launcher),
        image=IMAGE,
        engine=connect(),
        nodes=nodes,
        **options,  # type: ignore[arg-type]
    ) as rehearsal:
        rehearsal.up()
        if rehearsal.outcome.ok:
            between(rehearsal)
        return rehearsal.job()

"""The suite's shared test images: what each one is, and their build ahead of the tests.

Every image several tests use is built once per run (and kept as the next run's layer
cache). `python -m tests.integration.prebuild FOLDER REFERENCE...` builds them in a process of
its own: the suite starts it as the run begins, so the images build while the tests
that need no engine run, and a fixture waits for its image's build to end before it
asks for the image itself (by then every layer is cached: seconds). The fixtures never
depend on it: without it, or when it failed, they build the image themselves, and a
failing build fails there with its own message.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from builder.engine.build import build_image
from builder.engine.progress import PlainProgress
from builder.image.inputs import load_inputs
from builder.resolved import resolve
from builder.spec.loader import Stack, load_preset

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from builder.engine import Engine
    from builder.engine.build import BuildResult
    from builder.image.inputs import BuildInputs

BASE_IMAGE = os.environ.get("BUILDER_TEST_BASE", "builder-test/bookworm:latest")
CA_BUNDLE = Path(os.environ.get("BUILDER_TEST_CA", "/etc/ssl/certs/ca-certificates.crt"))
TORCH = "2.13.0"
WHEELHOUSE = Path(
    os.environ.get("BUILDER_TEST_WHEELHOUSE", Path.home() / ".cache/builder-tests/wheels")
)
IMAGE = "builder-test/cpu-deepspeed:it"
OPENMPI_IMAGE = "builder-test/cpu-openmpi:it"
FABRIC_IMAGE = "builder-test/fabric:it"
# Several CPU architectures (tests/integration/multiarch.py): the arm64 Debian base (a
# debootstrap of arm64 under qemu), a torch base per architecture (a framework base of
# our own, as NGC's PyTorch images are for both), and the stack built on them for both.
ARM64_BASE = "builder-test/bookworm-arm64:latest"
TORCH_BASE = "builder-test/torch-base"
MULTI_IMAGE = "builder-test/multi:it"
MULTI_KEEP = (
    ARM64_BASE,
    f"{TORCH_BASE}:amd64",
    f"{TORCH_BASE}:arm64",
    MULTI_IMAGE,
    f"{MULTI_IMAGE}-amd64",
    f"{MULTI_IMAGE}-arm64",
)
# Kept between sessions as the build cache; every other image a session makes is removed.
KEEP = (BASE_IMAGE, IMAGE, OPENMPI_IMAGE, FABRIC_IMAGE, *MULTI_KEEP)
REPO = Path(__file__).resolve().parents[2]


def cpu_stack() -> Stack:
    """The cpu-deepspeed preset as it is."""
    return load_preset("cpu-deepspeed")


def openmpi_stack() -> Stack:
    """cpu-deepspeed with image.openmpi: true; of DeepSpeed's ops only the shared-memory
    collectives its init_distributed builds (cpu_adam's compile is the cpu image's to
    prove, and takes minutes on two cores)."""
    stack = load_preset("cpu-deepspeed")
    image = replace(stack.spec.image, openmpi=True, deepspeed_ops=("deepspeed_shm_comm",))
    return replace(stack, spec=replace(stack.spec, image=image))


def fabric_stack() -> Stack:
    """image.fabric: infiniband on the cpu stack without DeepSpeed and sshd (a torchrun
    image): the fabric's layer is what its test is about, and the rest stays small."""
    stack = load_preset("cpu-deepspeed")
    image = replace(
        stack.spec.image,
        name="builder-test/fabric",
        tag="it",
        fabric="infiniband",
        deepspeed=None,
        deepspeed_ops=None,
        pdsh=False,
        ssh=replace(stack.spec.image.ssh, enabled=False),
    )
    launch = replace(stack.spec.launch, launcher="torchrun")
    return Stack(replace(stack.spec, image=image, launch=launch), stack.source, stack.root, None)


# In the order the prebuild makes them: the one most tests use first.
SHARED: dict[str, Callable[[], Stack]] = {
    IMAGE: cpu_stack,
    OPENMPI_IMAGE: openmpi_stack,
    FABRIC_IMAGE: fabric_stack,
}
PREBUILT = (*SHARED, MULTI_IMAGE)
"""What the prebuild makes, in its order: the shared images, then the multi-architecture
stack (tests/integration/multiarch.py: minutes under qemu, the last to be needed)."""


def suite_inputs(wheelhouse: Path = WHEELHOUSE) -> BuildInputs:
    """The suite's build inputs: the local base image, this machine's CA bundle (pip
    inside builds needs it) and the CPU torch wheelhouse."""
    return load_inputs(base_image=BASE_IMAGE, ca_bundle=CA_BUNDLE, wheelhouse=wheelhouse)


def cpu_wheels() -> list[Path]:
    return [p for p in WHEELHOUSE.glob(f"torch-{TORCH}*.whl") if "+cpu" in p.name]


def build_shared(reference: str, inputs: BuildInputs, engine: Engine) -> BuildResult:
    """One shared image, built (or found in the cache) with its build log kept quiet
    unless BUILDER_TEST_VERBOSE is set."""
    with open(os.devnull, "w") as sink:  # noqa: PTH123 - a text sink for the progress lines
        out = sys.stderr if os.environ.get("BUILDER_TEST_VERBOSE") else sink
        return build_image(
            resolve(SHARED[reference](), inputs),
            reference=reference,
            engine=engine,
            progress=PlainProgress(out),
        )


@dataclass
class Prebuild:
    """The process building the shared images ahead of the tests; a file per image says
    its build ended (`.done`, or `.failed` with the log beside it)."""

    process: subprocess.Popen[bytes]
    folder: Path
    references: tuple[str, ...]

    @classmethod
    def start(cls, folder: Path, references: Sequence[str]) -> Prebuild:
        folder.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "tests.integration.prebuild", str(folder), *references]
        # the builds' containers yield the CPU to the tests' (their default weight is 1024)
        env = {**os.environ, "BUILDER_BUILD_CPU_SHARES": "64"}
        with (folder / "prebuild.log").open("wb") as log:
            process = subprocess.Popen(
                argv,
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        return cls(process, folder, tuple(references))

    def finish(self, timeout: float = 3600) -> None:
        """Until every build ended: for tests that measure rates, which a build beside
        them would skew."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()

    def wait(self, reference: str, timeout: float = 3600) -> str:
        """Until reference's build ended (or the process did); what became of it. A wait
        that is not over at once says on the terminal what it waits for and for how long
        (a test that sits for minutes names the build it sits behind)."""
        if reference not in self.references:
            return "not prebuilt"
        start = time.monotonic()
        deadline = start + timeout
        said = False
        state: str | None = None
        while time.monotonic() < deadline:
            state = self._state(reference)
            if state is not None:
                break
            if not said:
                _say(
                    f"prebuild: waiting for {reference} ({self._building()}; its log: "
                    f"{self.folder / 'prebuild.log'})"
                )
                said = True
            time.sleep(1)
        state = state or "still building"
        if said:
            _say(f"prebuild: {reference} {state} after {time.monotonic() - start:.0f} s of waiting")
        return state

    def _state(self, reference: str) -> str | None:
        marker = self.folder / marker_of(reference)
        for state in ("done", "failed"):
            if marker.with_suffix(f".{state}").exists():
                return state
        if self.process.poll() is not None:
            return f"not built (the prebuild exited {self.process.returncode})"
        return None

    def _building(self) -> str:
        """What the prebuild builds now, and since when."""
        for reference in self.references:
            marker = self.folder / marker_of(reference)
            started = marker.with_suffix(".building")
            ended = any(marker.with_suffix(f".{s}").exists() for s in ("done", "failed"))
            if started.exists() and not ended:
                since = time.time() - started.stat().st_mtime
                return f"now building {reference}, for {since:.0f} s"
        return "the prebuild prepares the base image and the wheelhouse"

    def timings(self) -> list[str]:
        """The prebuild's own lines: each image and how long its build took."""
        log = self.folder / "prebuild.log"
        if not log.exists():
            return []
        return [
            line for line in log.read_text(errors="replace").splitlines() if " built in " in line
        ]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def _say(line: str) -> None:
    """A line on the terminal, past pytest's capture of the test's own output."""
    (sys.__stderr__ or sys.stderr).write(f"\n{line}\n")
    (sys.__stderr__ or sys.stderr).flush()


def marker_of(reference: str) -> str:
    """The file (.state: its suffix becomes .done or .failed) a reference's build ends in."""
    return reference.replace("/", "_").replace(":", "_") + ".state"

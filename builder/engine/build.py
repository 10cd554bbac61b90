"""`builder build`: render, stream the build through the engine, tag only on success.

The image is built untagged and tagged once the last step succeeded, so a
failed or interrupted build never moves a tag to a broken image. The full
log is kept in memory and written to a file only when the build fails: a
new file (mode 0600, never through a link) in the user's own 0700 folder of
build logs under the XDG state directory, since a log can hold what a build
printed about its inputs.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from builder import architectures
from builder._version import __version__
from builder.contract import DOCKERFILE_LABEL, VERSION_LABEL
from builder.engine.docker import connect
from builder.engine.push import pull_image
from builder.errors import BuildError, Interrupted, NotInEngine, UsageError
from builder.image.context import DOCKERFILE, docker_context
from builder.image.recipe import image_recipe
from builder.lock.apply import check_base

if TYPE_CHECKING:
    from collections.abc import Iterable

    from builder.architectures import Architecture
    from builder.engine.base import Engine
    from builder.output import OutputFile
    from builder.resolved import Resolved

TAIL_LINES = 30
_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
_MADE = re.compile(r"^ ---> ([0-9a-f]{12,64})$")
"""The image a step leaves ("---> Running in <container>" names a container)."""


@dataclass(frozen=True)
class StepRecord:
    """One Dockerfile instruction as the build ran it."""

    number: int
    instruction: str
    cached: bool
    seconds: float
    image: str | None = None
    """The (short) id of the image the step left, or of the base for a FROM."""


@dataclass(frozen=True)
class BuildResult:
    """A finished build: the image, its tag and how each step went."""

    image_id: str
    reference: str
    steps: tuple[StepRecord, ...]
    seconds: float
    dockerfile_sha256: str

    @property
    def created(self) -> tuple[str, ...]:
        """Images this build made (steps that ran, not cache hits), oldest first."""
        return _made(self.steps)

    @property
    def cacheable_steps(self) -> tuple[StepRecord, ...]:
        """Every step but FROM (which the engine resolves, never caches)."""
        return tuple(s for s in self.steps if not _is_from(s.instruction))

    @property
    def cached_steps(self) -> int:
        return sum(step.cached for step in self.cacheable_steps)


class Progress(Protocol):
    """What a build reports as it goes (see ``builder.progress``)."""

    def step(self, number: int, total: int, instruction: str) -> None: ...

    def cached(self) -> None: ...

    def line(self, text: str) -> None: ...

    def finish(self, result: BuildResult | None) -> None: ...


class _Quiet:
    def step(self, number: int, total: int, instruction: str) -> None:
        pass

    def cached(self) -> None:
        pass

    def line(self, text: str) -> None:
        pass

    def finish(self, result: BuildResult | None) -> None:
        pass


@dataclass
class _Run:
    """The parsing state of one build stream."""

    progress: Progress
    log: list[str] = field(default_factory=list)
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    steps: list[StepRecord] = field(default_factory=list)
    current: tuple[int, int, str] | None = None
    started: float = 0.0
    cached: bool = False
    step_image: str | None = None
    image_id: str | None = None

    def feed(self, event: dict[str, Any]) -> str | None:
        """Take one decoded event; return the error message if it is one."""
        if "error" in event:
            return str(event.get("errorDetail", {}).get("message") or event["error"]).strip()
        if "aux" in event and isinstance(event["aux"], dict) and "ID" in event["aux"]:
            self.image_id = str(event["aux"]["ID"])
        for raw in str(event.get("stream") or event.get("status") or "").splitlines():
            self._line(raw.rstrip())
        return None

    def _line(self, text: str) -> None:
        if not text:
            return
        self.log.append(text)
        match = _STEP.match(text)
        if match:
            self.close_step()
            # the classic builder keeps the Dockerfile's continuation indents
            number, total, instruction = int(match[1]), int(match[2]), " ".join(match[3].split())
            self.current, self.started, self.cached, self.step_image = (
                (number, total, instruction),
                time.monotonic(),
                False,
                None,
            )
            self.tail.clear()
            self.progress.step(number, total, instruction)
        elif text.strip() == "---> Using cache":
            self.cached = True
            self.progress.cached()
        elif made := _MADE.match(text):
            self.step_image = made[1]
        elif not text.startswith(" ---> ") and not text.startswith("Removing intermediate"):
            self.tail.append(text)
            self.progress.line(text)

    def close_step(self) -> None:
        if self.current is not None:
            self.steps.append(self._record(self.current))
            self.current = None

    def _record(self, current: tuple[int, int, str]) -> StepRecord:
        number, _, instruction = current
        seconds = time.monotonic() - self.started
        return StepRecord(number, instruction, self.cached, seconds, self.step_image)

    @property
    def created(self) -> tuple[str, ...]:
        """Images the build made so far, the step under way included."""
        under_way = [self._record(self.current)] if self.current else []
        return _made([*self.steps, *under_way])


@dataclass(frozen=True)
class Built:
    """A stack built for each of its CPU architectures (image.platforms)."""

    reference: str
    """name:tag: the one image, or (several) the one a push makes a manifest list."""
    results: dict[str, BuildResult]
    """platform -> its build, tagged reference (one) or reference-ARCH (several)."""

    @property
    def primary(self) -> BuildResult:
        """The build name:tag names in the engine: this machine's architecture's, else the
        first."""
        return self.results.get(architectures.native().platform) or next(
            iter(self.results.values())
        )


def build_platforms(
    resolved: Resolved,
    *,
    reference: str | None = None,
    build_args: dict[str, str] | None = None,
    nocache: bool = False,
    progress: Progress | None = None,
    engine: Engine | None = None,
) -> Built:
    """Build the stack for every architecture of image.platforms (this machine's when
    unset). One architecture is tagged reference (default: the spec's name:tag), as any
    build; several are tagged reference-ARCH each (name:tag-arm64), and reference names
    this machine's (else the first) in the engine, until a push makes it the manifest
    list of them all."""
    spec = resolved.spec
    reference = reference or f"{spec.image.name}:{spec.image.tag}"
    wanted = architectures.of_platforms(spec.image.platforms)
    for architecture in wanted:
        why = resolved.platform.architecture_problem(architecture.platform)
        if why is not None:
            raise UsageError(
                f"{architecture.platform} (this machine's architecture; image.platforms is "
                f"unset): {why}. Build on an x86_64 machine, or set image.platforms: "
                f"[{', '.join(resolved.platform.architectures)}]",
                field="image.platforms",
                value=architecture.platform,
            )
    engine = engine or connect()
    several = len(wanted) > 1
    results: dict[str, BuildResult] = {}
    for architecture in wanted:
        results[architecture.platform] = build_image(
            resolved,
            reference=architectures.tagged(reference, architecture) if several else reference,
            build_args=build_args,
            nocache=nocache,
            progress=progress,
            engine=engine,
            architecture=architecture if spec.image.platforms else None,
        )
    built = Built(reference, results)
    if several:
        engine.tag(built.primary.image_id, reference)
    return built


def build_image(
    resolved: Resolved,
    *,
    reference: str | None = None,
    build_args: dict[str, str] | None = None,
    nocache: bool = False,
    progress: Progress | None = None,
    engine: Engine | None = None,
    architecture: Architecture | None = None,
) -> BuildResult:
    """Build the resolved stack's image and tag it reference (default: the spec's
    name:tag), for architecture (default: the engine's own). With a lock, its base must
    still be in the engine as locked."""
    stack = resolved.stack
    if architecture is not None:
        resolved = resolved.for_architecture(architecture)
    inputs = resolved.inputs
    engine = engine or connect()
    if inputs.lock is not None:
        check_base(inputs.lock, engine)
    recipe = image_recipe(resolved)
    if architecture is not None and check_base_architecture(engine, recipe.base, architecture):
        pull_image(engine, recipe.base, platform=architecture.platform)
    try:
        return run_build(
            docker_context(recipe),
            reference or f"{stack.spec.image.name}:{stack.spec.image.tag}",
            log_name=stack.spec.name,
            build_args=build_args,
            nocache=nocache,
            progress=progress,
            engine=engine,
            platform=architecture.platform if architecture is not None else None,
        )
    except BuildError as exc:
        if inputs.lock is None:
            raise
        raise BuildError(
            f"{exc}\nThis build installs exactly the lock: a locked version that can no "
            "longer be installed fails here. Build with --no-lock, then `builder lock` again.",
            exc.created,
            image=exc.image,
        ) from None


def check_base_architecture(engine: Engine, base: str, architecture: Architecture) -> bool:
    """The base exists for architecture, where the engine can tell before the build: the
    engine's own copy is of it, or the base's registry lists it. True when the engine's
    copy is of another architecture and the registry has this one: the caller pulls it
    (an engine keeps one image per tag, and its classic builder does not pull a base it
    has). A base the engine holds for another architecture only, and whose registry
    cannot be asked, is refused: nothing of another architecture is ever built on."""
    try:
        held = engine.image(base).architecture
    except NotInEngine:
        held = None
    if held == architecture.engine:
        return False
    listed = engine.registry_platforms(base)
    if listed is not None and architecture.platform in listed:
        return held is not None
    if listed is None and held is None:
        return False  # neither can tell: the engine's pull says, with its own words
    have = f"the engine's copy is linux/{held}" if held else "the engine has no copy"
    where = (
        f"its registry lists {', '.join(listed) or 'no platform'}"
        if listed is not None
        else "its registry cannot be asked"
    )
    raise BuildError(
        f"base image {base} has no {architecture.platform} image ({have}; {where}): "
        f"use a base published for {architecture.machine} (a multi-architecture one such as "
        "debian:bookworm-slim or nvidia/cuda), or give that architecture its own base "
        f"(--platform-base {architecture.platform}=NAME:TAG)"
    )


def run_build(
    files: list[OutputFile],
    reference: str,
    *,
    log_name: str = "image",
    build_args: dict[str, str] | None = None,
    nocache: bool = False,
    progress: Progress | None = None,
    engine: Engine | None = None,
    platform: str | None = None,
) -> BuildResult:
    """Build a context (a Dockerfile and the files it copies); tag reference on success."""
    dockerfile = next(f.text for f in files if f.path == DOCKERFILE)
    digest = hashlib.sha256(dockerfile.encode()).hexdigest()
    labels = {VERSION_LABEL: __version__, DOCKERFILE_LABEL: digest}
    engine = engine or connect()
    run = _Run(progress or _Quiet())
    started = time.monotonic()
    try:
        with context_tar(files) as context:
            options: dict[str, Any] = {"platform": platform} if platform else {}
            events = engine.build(
                context,
                buildargs=dict(build_args or {}),
                labels=labels,
                nocache=nocache,
                **options,
            )
            error = _consume(events, run)
    except KeyboardInterrupt:
        raise Interrupted(
            f"build of {reference} interrupted; nothing was tagged (the engine stops the build "
            "when the client goes away)"
        ) from None
    if error is not None or run.image_id is None:
        run.progress.finish(None)
        raise _failure(log_name, run, error or "the engine reported no image id", reference)
    run.close_step()
    engine.tag(run.image_id, reference)
    result = BuildResult(
        run.image_id,
        reference,
        tuple(run.steps),
        time.monotonic() - started,
        digest,
    )
    run.progress.finish(result)
    return result


def _is_from(instruction: str) -> bool:
    return instruction.upper().startswith("FROM ")


def _made(steps: Iterable[StepRecord]) -> tuple[str, ...]:
    """The images of the steps that ran (a cache hit reuses one; a FROM names the base)."""
    return tuple(s.image for s in steps if s.image and not s.cached and not _is_from(s.instruction))


def _consume(events: Iterable[dict[str, Any]], run: _Run) -> str | None:
    for event in events:
        error = run.feed(event)
        if error is not None:
            return error
    return None


def log_folder() -> Path:
    """$XDG_STATE_HOME/builder/logs (default ~/.local/state/builder/logs), mode 0700."""
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if Path(state).is_absolute() else Path.home() / ".local" / "state"
    folder = base / "builder" / "logs"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.is_symlink() or not folder.is_dir():
        raise OSError(f"{folder} is not a folder of its own")
    info = folder.stat()
    if info.st_uid != os.getuid():
        raise OSError(f"{folder} belongs to another user")
    if info.st_mode & 0o077:
        folder.chmod(0o700)  # the user's own folder: made private, never another's
    return folder


def write_log(log_name: str, text: str) -> Path:
    """A new private file (0600) for text in log_folder(): O_EXCL and O_NOFOLLOW, so it
    never replaces or follows anything already there; unique per build."""
    folder = log_folder()
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", log_name)[:64] or "image"
    for attempt in range(100):
        path = folder / f"build-{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{attempt}.log"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        return path
    raise OSError(f"no free log file name in {folder}")


def _failure(log_name: str, run: _Run, error: str, reference: str) -> BuildError:
    text = "\n".join([*run.log, f"ERROR: {error}"]) + "\n"
    try:
        where_log = f"full log: {write_log(log_name, text)}"
    except OSError as exc:
        where_log = f"the full log could not be kept ({exc})"
    if run.current is None:
        where = "before the first step"
    else:
        number, total, instruction = run.current
        where = f"at step {number}/{total}: {instruction[:200]}"
    if run.current is not None and run.current[0] == 1 and _is_from(run.current[2]):
        hint = (
            " The base image is not in the engine and could not be pulled: pull or build it "
            "first, or choose another with --base-image."
        )
    else:
        hint = ""
    tail = "\n".join(f"    {line}" for line in run.tail)
    return BuildError(
        f"build of {reference} failed {where}\n{error}.{hint}\n"
        f"last lines:\n{tail or '    (none)'}\n"
        f"{where_log}; no tag was moved.",
        created=run.created,
    )


def context_tar(files: list[OutputFile]) -> IO[bytes]:
    """The build context as a tar stream, normalised so unchanged inputs hit the cache.

    Owner, group, names and mtimes are fixed and entries sorted, so the same
    files always give the same bytes; large inputs (wheels) are streamed from
    disk into a spooled file rather than held in memory.
    """
    spool = tempfile.SpooledTemporaryFile(max_size=64 * 2**20)  # noqa: SIM115 - returned open
    with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for f in sorted({f.path: f for f in files}.values(), key=lambda f: f.path):
            info = tarfile.TarInfo(f.path)
            info.mode, info.uid, info.gid, info.mtime = f.mode, 0, 0, 0
            info.uname = info.gname = ""
            if f.source is not None:
                info.size = f.source.stat().st_size
                with f.source.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                data = f.text.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    spool.seek(0)
    return spool

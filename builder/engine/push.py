"""Pushing an image to its registry and pulling one by digest, through the engine.

The engine streams JSON events; a push ends with the manifest's digest
(``aux.Digest``), which is what nodes can pull and check. Errors become one of
three, each with its own exit code: the registry does not answer, it refused
the credentials, it has no such digest. Credentials come from the user's docker
config, as the docker CLI reads them; builder never reads or prints them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from builder import architectures
from builder.errors import (
    NotInEngine,
    RegistryRefused,
    RegistryUnreachable,
    UnknownDigest,
    UsageError,
    shown,
)
from builder.image.pin import check_pin_path, write_pin
from builder.image.registry import DIGEST, Pushed, split_reference
from builder.spec.loader import load_spec

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from builder.engine.base import Engine
    from builder.spec.loader import Stack

REFUSED = (
    "unauthorized",
    "authentication required",
    "no basic auth credentials",
    "denied: ",
    "requested access to the resource is denied",
    "pull access denied",
)
UNKNOWN = ("manifest unknown", "no such manifest", "repository does not exist")


def push_image(
    engine: Engine, reference: str, on_line: Callable[[str], None] = lambda _: None
) -> Pushed:
    """Push reference (a name:tag whose name starts with its registry) and return its
    digest; progress lines go to on_line."""
    digest = None
    for event in engine.push(reference):
        _raise_on_error(event, reference, "push")
        aux = event.get("aux") or {}
        if isinstance(aux, dict) and DIGEST.fullmatch(str(aux.get("Digest", ""))):
            digest = str(aux["Digest"])
        line = _progress(event)
        if line:
            on_line(line)
    if digest is None:
        raise RegistryUnreachable(
            f"the push of {reference} ended without the registry's digest; push it again",
            registry=registry_of(reference),
            reference=reference,
        )
    return Pushed(reference, digest)


def push_platforms(
    engine: Engine,
    reference: str,
    platforms: tuple[str, ...],
    on_line: Callable[[str], None] = lambda _: None,
) -> Pushed:
    """Push the image of every platform, then reference as their manifest list: several
    architectures go up as name:tag-ARCH each (what `builder build` tagged them), and
    name:tag becomes the list of them, which each node's engine resolves to its own
    architecture's image; one architecture is pushed as name:tag itself. Every image is
    checked first to be of its architecture, so that a list never names a wrong one."""
    if len(platforms) <= 1:
        pushed = push_image(engine, reference, on_line)
        known = architectures.named(engine.image(reference).architecture)
        mine = {known.platform: pushed.digest} if known else {}
        return Pushed(pushed.reference, pushed.digest, mine)
    images = {p: architectures.tagged(reference, architectures.KNOWN[p]) for p in platforms}
    for platform, local in images.items():
        if not engine.exists(local):
            raise NotInEngine(
                f"image {local} ({platform}) is not in the local engine: build the stack "
                "first (`builder build` tags each architecture name:tag-ARCH)",
                image=local,
            )
        held = engine.image(local).architecture
        if f"linux/{held}" != platform:
            raise UsageError(
                f"image {local} is linux/{held or 'unknown'}, not {platform}: build the stack "
                "again (`builder build`), which tags each architecture's own image",
                value=local,
            )
    digests = {p: push_image(engine, local, on_line).digest for p, local in images.items()}
    repository = split_reference(reference)[0]
    members = [f"{repository}@{digest}" for digest in digests.values()]
    index = engine.push_manifest_list(reference, members)
    if not DIGEST.fullmatch(index):
        raise RegistryUnreachable(
            f"the manifest list {reference} was not pushed: {shown(index, quote=False)}",
            registry=registry_of(reference),
            reference=reference,
        )
    on_line(f"{reference}: manifest list of {', '.join(digests)} pushed")
    return Pushed(reference, index, digests)


def push_and_record(
    engine: Engine,
    reference: str,
    spec_path: Path | None,
    on_line: Callable[[str], None] = lambda _: None,
    platforms: tuple[str, ...] = (),
    *,
    stack: Stack | None = None,
) -> tuple[Pushed, Path | None]:
    """Push reference (of several platforms: each architecture's image and their
    manifest list) and, when it is the spec file's own name:tag, record its digest
    beside the spec (stack.digest), which launch, bundle, slurm and preflight then pin;
    (the push, the record written or None: no spec file, or another name:tag). stack:
    the spec file as the caller loaded it (a command's one resolve); None: read here."""
    own = False
    if spec_path is not None:  # read first: a bad spec stops before anything is pushed
        image = (stack or load_spec(spec_path)).spec.image
        own = f"{image.name}:{image.tag}" == reference
        if own:
            check_pin_path(spec_path)
            platforms = platforms or image.platforms or ()
    pushed = push_platforms(engine, reference, platforms, on_line)
    if spec_path is None or not own:
        return pushed, None
    try:
        return pushed, write_pin(spec_path, pushed)
    except UsageError as exc:
        raise UsageError(
            f"pushed {pushed.pinned}, but its record was not written: {exc}",
            field=exc.field,
            value=exc.value,
            path=exc.path or spec_path,
        ) from None


def pull_image(
    engine: Engine,
    reference: str,
    on_line: Callable[[str], None] = lambda _: None,
    platform: str | None = None,
) -> None:
    """Pull reference (name:tag or name@sha256:...) into the engine; of a manifest list,
    platform's image (default: the engine's own architecture's)."""
    events = engine.pull(reference, platform) if platform else engine.pull(reference)
    for event in events:
        _raise_on_error(event, reference, "pull")
        line = _progress(event)
        if line:
            on_line(line)


def _raise_on_error(event: dict[str, Any], reference: str, action: str) -> None:
    error = event.get("error") or (event.get("errorDetail") or {}).get("message")
    if not error:
        return
    text = str(error)
    lowered = text.lower()
    said = shown(text, quote=False, limit=300)
    registry = registry_of(reference)
    if "@" in reference and any(word in lowered for word in UNKNOWN):
        raise UnknownDigest(
            f"{registry} has no image {reference}: {said}. "
            "Push the image again (`builder push`) and use the digest it reports",
            registry=registry,
            reference=reference,
        )
    if any(word in lowered for word in REFUSED):
        raise RegistryRefused(
            f"{registry} refused the {action} of {reference}: {said}. "
            f"Log in with `docker login {registry}` (builder uses the same credentials) "
            "or check your rights on the repository",
            registry=registry,
            reference=reference,
        )
    raise RegistryUnreachable(
        f"the {action} of {reference} failed: {shown(text, quote=False, limit=300)}. "
        f"Check that {registry} answers (the image's name starts with its registry, "
        "e.g. registry.example.com:5000/team/train:1.0)",
        registry=registry,
        reference=reference,
    )


def registry_of(reference: str) -> str:
    """The registry a reference names, as docker reads it: the first component when it
    has a '.' or ':' or is localhost; else Docker Hub."""
    first, slash, _ = reference.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def _progress(event: dict[str, Any]) -> str:
    status = str(event.get("status") or "")
    if not status or event.get("progressDetail"):
        return ""  # the per-layer byte counters: too many lines to show
    layer = event.get("id")
    return f"{layer}: {status}" if layer else status

"""Build inputs: how to reach what the spec asks for, not what to install.

A corporate CA, a PyPI mirror, a folder of wheels (air-gapped clusters, or a
CPU torch on hand), another base image: ``builder build`` and ``builder
render`` take the same options, so the Dockerfile a user reads is the one
that is built. None of these may leave build-only material in the image:
the CA, the pip settings and the wheels live only in the build stage, which
the final image never inherits (``steps.Fetch`` says why apt gets no CA).
An index URL with credentials in it is refused (``check_index_url``): the
build stage is an image the engine keeps, and a .def's %post is stored in
the SIF.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from builder import architectures
from builder.architectures import foreign_wheel
from builder.errors import Problem, SpecError, UsageError, shown
from builder.files import MIB, check_input, named, read_input
from builder.image.reference import checked as checked_reference
from builder.image.reference import problem as reference_problem
from builder.spec.check import check_spec

if TYPE_CHECKING:
    from pathlib import Path

    from builder.architectures import Architecture
    from builder.lock.file import Lock
    from builder.spec.loader import Stack

_PEM = re.compile(r"-----BEGIN CERTIFICATE-----\s+[A-Za-z0-9+/=\s]+-----END CERTIFICATE-----")
# PEP 427: {name}-{version}(-{build})?-{python}-{abi}-{platform}.whl
_WHEEL = re.compile(r"(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl")
_URL = re.compile(r"(https?|file)://\S+")
MAX_CA_BYTES = 16 * MIB
"""The system's whole bundle (ca-certificates.crt) is about 200 KiB."""


@dataclass(frozen=True)
class Wheel:
    """One wheel of a wheelhouse, named as pip names it."""

    path: Path
    name: str
    version: str

    @property
    def filename(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class BuildInputs:
    """Everything about fetching that may differ between two builds of one spec."""

    base_image: str | None = None
    ca_pem: str | None = None
    trust_ca: bool = False
    pip_index_url: str | None = None
    pip_extra_index_urls: tuple[str, ...] = ()
    wheels: tuple[Wheel, ...] = ()
    lock: Lock | None = None
    """The stack's lock: build exactly its packages (see builder.lock)."""
    platform_bases: tuple[tuple[str, str], ...] = ()
    """(platform, base image) pairs: that architecture's build starts from its own base
    (a local debootstrap of it, a site's mirror) instead of the spec's."""

    def for_architecture(self, architecture: Architecture) -> BuildInputs:
        """The inputs of one architecture's build: its own base where one is given, and
        the wheelhouse without the wheels another architecture's tags name (pip could not
        install them there, and they would only swell the build context)."""
        base = dict(self.platform_bases).get(architecture.platform, self.base_image)
        wheels = tuple(w for w in self.wheels if not foreign_wheel(w.filename, architecture))
        return replace(self, base_image=base, wheels=wheels, platform_bases=())

    def wheel_for(self, name: str, version: str) -> Wheel | None:
        """The wheelhouse's wheel of name==version, if it has one."""
        key = _normalise(name)
        return next((w for w in self.wheels if w.name == key and w.version == version), None)


def load_inputs(
    *,
    base_image: str | None = None,
    ca_bundle: Path | None = None,
    trust_ca: bool = False,
    pip_index_url: str | None = None,
    pip_extra_index_urls: tuple[str, ...] = (),
    wheelhouse: Path | None = None,
    platform_bases: tuple[str, ...] = (),
) -> BuildInputs:
    """Read and check the files the options name (platform_bases: PLATFORM=NAME:TAG
    each); every problem is a UsageError."""
    if pip_index_url is not None:
        check_index_url(pip_index_url, "--pip-index-url")
    for url in pip_extra_index_urls:
        check_index_url(url, "--pip-extra-index-url")
    if base_image is not None:
        checked_reference(base_image, field="--base-image")
    if trust_ca and ca_bundle is None:
        raise UsageError("--trust-ca needs --ca-bundle FILE: there is no CA to trust")
    bases = tuple(_platform_base(entry) for entry in platform_bases)
    twice = sorted({p for p, _ in bases if [q for q, _ in bases].count(p) > 1})
    if twice:
        raise UsageError(
            f"--platform-base {twice[0]}: given twice; give each platform one base",
            field="--platform-base",
            value=twice[0],
        )
    return BuildInputs(
        platform_bases=bases,
        base_image=base_image,
        ca_pem=_read_ca(ca_bundle) if ca_bundle is not None else None,
        trust_ca=trust_ca,
        pip_index_url=pip_index_url,
        pip_extra_index_urls=tuple(pip_extra_index_urls),
        wheels=_read_wheelhouse(wheelhouse) if wheelhouse is not None else (),
    )


def _platform_base(entry: str) -> tuple[str, str]:
    platform, equals, base = entry.partition("=")
    fix = (
        f"write PLATFORM=NAME:TAG, PLATFORM one of {', '.join(architectures.PLATFORMS)}, "
        "e.g. linux/arm64=registry.example.com/base:bookworm-arm64"
    )
    if not equals or platform.strip().lower() not in architectures.KNOWN_NAMES:
        raise UsageError(
            f"--platform-base {shown(entry)}: {fix}", field="--platform-base", value=entry
        )
    problem = reference_problem(base)
    if problem is not None:
        raise UsageError(
            f"--platform-base {shown(entry)}: {problem}",
            field="--platform-base",
            value=entry,
        )
    return architectures.KNOWN_NAMES[platform.strip().lower()].platform, base


def check_index_url(url: str, option: str) -> None:
    """A URL pip can use, without credentials: they would be kept where others read them."""
    if not _URL.fullmatch(url):
        raise UsageError(f"{option} {url!r} is not an index URL (http://, https:// or file://)")
    netloc = urlsplit(url).netloc
    if "@" in netloc:
        shown = url.replace(netloc, "***@" + netloc.rsplit("@", 1)[1], 1)
        raise UsageError(
            f"{option} {shown}: the URL carries credentials (user:password@ or token@), "
            "and builder refuses them. pip reads its index from the build's environment, "
            "so they would be stored in the build stage's image config and history (which "
            "the engine keeps and `docker history` shows) and in a .def's %post (which "
            "Apptainer keeps inside the SIF); the classic builder has no build secrets to "
            "hide them in. Instead: point --pip-index-url at a mirror that needs no "
            "credentials from the build (e.g. a devpi or proxy on your network that holds "
            "them itself), or download the wheels beforehand with your own credentials "
            "(`pip download -d wheels -r requirements.txt`) and pass --wheelhouse wheels."
        )


def with_base(stack: Stack, inputs: BuildInputs) -> Stack:
    """The stack with --base-image applied, re-checked like a spec that named it; every
    --platform-base one of the platforms the spec builds."""
    built = stack.spec.image.platforms or ()
    for platform, base in inputs.platform_bases:
        if platform not in built:
            said = ", ".join(built) or "unset: one image, for the engine's own architecture"
            raise UsageError(
                f"--platform-base {platform}={shown(base)}: the spec does not build {platform} "
                f"(image.platforms: {said}); add it to image.platforms, or leave the option out",
                field="--platform-base",
                value=platform,
            )
    if inputs.base_image is None:
        return stack
    spec = replace(stack.spec, image=replace(stack.spec.image, base=inputs.base_image))
    problems = [
        Problem(path.replace("image.base", "--base-image"), message)
        for path, message in check_spec(spec)
    ]
    if problems:
        raise SpecError(stack.source, problems)
    return replace(stack, spec=spec)


def _read_ca(path: Path) -> str:
    fix = "give a PEM file of CA certificates (e.g. /etc/ssl/certs/ca-certificates.crt)"
    raw = read_input(path, what="--ca-bundle", limit=MAX_CA_BYTES, fix=fix, field="--ca-bundle")
    if raw is None:
        raise UsageError(
            f"--ca-bundle {named(path)}: cannot read it (no such file); {fix}",
            field="--ca-bundle",
            path=path,
        )
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise UsageError(
            f"--ca-bundle {named(path)} (line {line}) is not ASCII text; {fix}",
            field="--ca-bundle",
            path=path,
        ) from None
    certificates = _PEM.findall(text)
    if not certificates:
        raise UsageError(
            f"--ca-bundle {path}: no PEM certificate in it; give a file with "
            "-----BEGIN CERTIFICATE----- blocks (e.g. /etc/ssl/certs/ca-certificates.crt)"
        )
    return "\n".join(certificates) + "\n"


def _read_wheelhouse(folder: Path) -> tuple[Wheel, ...]:
    if not folder.is_dir():
        raise UsageError(
            f"--wheelhouse {named(folder)}: not a folder (or a symlink loop); name the folder "
            "of .whl files",
            field="--wheelhouse",
            path=folder,
        )
    wheels = []
    for path in sorted(folder.glob("*.whl")):
        match = _WHEEL.fullmatch(path.name)
        if match is None:
            raise UsageError(f"--wheelhouse: {path.name} is not a wheel file name (PEP 427)")
        # its bytes are copied into the build context: a FIFO there would block the build
        check_input(
            path, what="--wheelhouse:", fix="remove it from the wheelhouse", field="--wheelhouse"
        )
        wheels.append(Wheel(path, _normalise(match["name"]), match["version"].split("+")[0]))
    if not wheels:
        raise UsageError(f"--wheelhouse {folder}: no .whl files in it")
    return tuple(wheels)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()

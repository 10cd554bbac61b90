"""An image as enroot reads it: the reference pyxis's ``--container-image`` takes, and the
`enroot import` that makes a squashfs file of it once (`builder squashfs`).

Enroot has its own reference grammar, ``[USER@][REGISTRY#]IMAGE[:TAG]``, not docker's.
Checked against NVIDIA/enroot src/docker.sh at v3.5.0 (``docker::import``, l.259-265)
and v4.1.2 (``docker::_parse_uri``, l.198-300):

- the registry is written before ``#``: enroot 3.x reads ``nvcr.io/nvidia/pytorch`` as
  a Docker Hub repository named so (docker's ``REGISTRY/IMAGE`` form is read only
  from v4.0.0, commit f29a45c); without one enroot asks Docker Hub
  (``registry-1.docker.io``; ``docker.io`` itself is not an alias there);
- a digest is written as the tag, ``IMAGE:sha256:<hex>``: the one pinned form both
  read (3.x since v3.0.1, commit 0a48a03 "Allow specifiying digests in Docker tags";
  4.x maps ``IMAGE@sha256:<hex>`` to the same tag, but 3.x refuses the ``@``);
- the image path is lowercase (``[[:lower:][:digit:]/._-]+``), the tag
  ``[[:alnum:]._:-]+``.

An image only in the local engine (a name with no registry host, ``team/train:1.0``)
is not in any registry enroot can reach; unpinned, enroot would fetch whatever Docker
Hub holds under that name. `builder push` puts it in a registry (a plan then pins the
pushed digest), or `builder squashfs` makes a file of it from the local engine
(``dockerd://NAME:TAG``, whose pattern ``[[:alnum:]/._:-]+`` takes no digest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.errors import UsageError, shown
from builder.image.registry import DIGEST
from builder.launch.actions import bind_problem

ENROOT = "enroot"
DOCKER_HUB = "registry-1.docker.io"
"""Docker Hub's registry as enroot names it (its default when no registry is given)."""
DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", DOCKER_HUB})
"""What docker reads as Docker Hub; enroot asks the host written, so builder writes this."""
SUFFIXES = (".sqsh", ".squashfs")

_HOST = re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?::[0-9]{1,5})?")
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


@dataclass(frozen=True)
class Reference:
    """A docker image reference in parts: the registry host (None: docker's default,
    Docker Hub), the repository path, and a tag or a digest (a digest wins)."""

    registry: str | None
    path: str
    tag: str | None = None
    digest: str | None = None

    @property
    def enroot(self) -> str:
        """``REGISTRY#IMAGE[:TAG]``, pinned as ``REGISTRY#IMAGE:sha256:<hex>``: what enroot
        3.x and 4.x both read the same (see the module's note)."""
        registry = self.registry or DOCKER_HUB
        if registry in DOCKER_HUB_ALIASES:
            registry = DOCKER_HUB
        path = self.path if registry != DOCKER_HUB or "/" in self.path else f"library/{self.path}"
        version = self.digest or self.tag
        return f"{registry}#{path}" + (f":{version}" if version else "")


def parse_reference(image: str, option: str = "--image") -> Reference:
    """image (name[:tag][@sha256:...]) in parts, or a UsageError (of option) saying what
    enroot reads."""
    named, at, digest = image.partition("@")
    if at and not DIGEST.fullmatch(digest):
        raise UsageError(
            f"image {shown(image)}: a pinned image is NAME@sha256:<64 lowercase hex digits>",
            field=option,
            value=image,
        )
    first, slash, rest = named.partition("/")
    registry = None
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, named = first, rest
    path, colon, tag = named.rpartition(":") if ":" in named else (named, "", "")
    problems = []
    if registry is not None and not _HOST.fullmatch(registry):
        problems.append(f"{shown(registry)} is not a registry host[:port]")
    if not _PATH.fullmatch(path):
        problems.append(
            "the repository must be lowercase letters, digits and '.', '_', '-' between "
            "'/'-separated parts (docker's rule; enroot's image pattern is "
            "[[:lower:][:digit:]/._-]+)"
        )
    if colon and not _TAG.fullmatch(tag):
        problems.append("a tag is letters, digits, '_', '.' and '-' (at most 128)")
    if problems:
        raise UsageError(f"image {shown(image)}: {'; '.join(problems)}", field=option, value=image)
    return Reference(registry, path, tag or None, digest or None)


def enroot_image(image: str) -> str:
    """The image as pyxis's --container-image (an enroot URI without ``docker://``), for
    an image that nodes pull from a registry."""
    reference = parse_reference(image)
    if reference.registry is None and reference.digest is None:
        raise UsageError(
            f"image {shown(image)} names no registry, so it is only in the local engine "
            "(or is Docker Hub's image of that name, which enroot would fetch instead): "
            "push it (`builder push`; the script then pins the pushed digest), give "
            "--image REGISTRY/NAME:TAG, or make a squashfs of it once (`builder squashfs "
            f"{image} -o /shared/images/NAME.sqsh`) and set launch.squashfs to that path",
            field="--image",
            value=image,
        )
    return reference.enroot


def squashfs_problem(path: str) -> str | None:
    """Why path cannot be the squashfs file every node reads (launch.squashfs, `builder
    squashfs -o`), or None: one absolute path (pyxis reads a --container-image that
    starts with '/' as a file; anything else is a registry name) that names the file."""
    if not path.startswith("/"):
        return (
            "give an absolute path on shared storage, the same on every node (pyxis reads "
            "a --container-image that starts with '/' as a file, a bare name as an image "
            "in a registry)"
        )
    why = bind_problem(path)
    if why is not None:
        return why
    name = path.rsplit("/", 1)[-1]
    if not name.endswith(SUFFIXES) or name in SUFFIXES:
        return "name the squashfs file itself: a path ending in NAME.sqsh (or NAME.squashfs)"
    return None


def squashfs_import_argv(image: str, *, output: str, option: str = "IMAGE") -> list[str]:
    """`enroot import` of image into the squashfs file output: from its registry when it
    is pinned (the nodes' own bytes), else from the local Docker engine (dockerd://)."""
    if why := squashfs_problem(output):
        raise UsageError(f"--output {shown(output)}: {why}", field="--output", value=output)
    reference = parse_reference(image, option)
    if reference.digest is not None:
        source = f"docker://{reference.enroot}"
    else:
        source = f"dockerd://{image}"
    return [ENROOT, "import", "--output", output, source]

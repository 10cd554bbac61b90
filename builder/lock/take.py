"""Taking a lock: read a built image of the stack (and its base) for every package."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.contract import BASE_NAME_LABEL, SPEC_HASH_LABEL
from builder.errors import NotInEngine, UsageError
from builder.fingerprint.sources import of_image
from builder.lock.file import Base, Lock
from builder.payload.collect import DPKG_QUERY, parse_dpkg

if TYPE_CHECKING:
    from builder.engine.base import Engine
    from builder.resolved import Resolved


def take_lock(resolved: Resolved, engine: Engine, image: str) -> Lock:
    """The lock of a built image of the resolved stack (the image carries its spec hash)."""
    if not engine.exists(image):
        raise NotInEngine(
            f"image {image} is not built: run `builder build` first, then lock it", image=image
        )
    info = engine.image(image)
    fingerprint = of_image(engine, image)
    base_ref = info.labels.get(BASE_NAME_LABEL)
    if base_ref is None or SPEC_HASH_LABEL not in info.labels:
        raise UsageError(
            f"image {image} was not built by builder: there is no stack to lock", value=image
        )
    if not engine.exists(base_ref):
        raise NotInEngine(
            f"the base image {base_ref} of {image} is not in the engine any more; "
            "pull it (or build again) before locking",
            image=base_ref,
        )
    base_info = engine.image(base_ref)
    base_apt = parse_dpkg(engine.run(base_ref, DPKG_QUERY[1:], entrypoint=[DPKG_QUERY[0]]))
    image_apt: dict[str, str] = fingerprint.data["apt"]
    added = {name: v for name, v in image_apt.items() if base_apt.get(name) != v}
    return Lock(
        stack=resolved.spec.name,
        spec_hash=info.labels[SPEC_HASH_LABEL],
        image=image,
        base=Base(base_ref, base_info.id, engine.repo_digest(base_ref)),
        python=dict(fingerprint.data["packages"]),
        apt=added,
    )

"""DeepSpeed's prebuilt ops, as a fingerprint records them, and whether they suit a device.

DeepSpeed uses an op it compiled at install only when its install recorded it
(``installed_ops``) for the accelerator that runs it (``accelerator_name``);
otherwise it compiles the op just in time, at the first use in every fresh
container. The GPU code in a prebuilt op is for the architectures the image
named at build (TORCH_CUDA_ARCH_LIST, PYTORCH_ROCM_ARCH). The collector
(``payload/collect.py``) records them as ``{"ops": [...], "accelerator": ...,
"arch": [...]}`` under ``deepspeed_ops``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Sequence

KEY = "deepspeed_ops"
"""The fingerprint's key (absent where the environment has no DeepSpeed)."""
FIELDS = {
    "ops": "deepspeed ops",
    "accelerator": "deepspeed ops accelerator",
    "arch": "deepspeed ops arch",
}
"""The fields verify and diff compare, by their readable names."""
Coverage = Literal["native", "ptx", "none"]
"""Whether an architecture list has code for a device: compiled for it (or for an
earlier minor of its major), only as PTX the driver compiles at first use, or not."""

HOST_OPS = frozenset(
    {
        "async_io",
        "cpu_adagrad",
        "cpu_adam",
        "cpu_lion",
        "deepspeed_ccl_comm",
        "deepspeed_shm_comm",
        "pin_memory",
        "utils",
    }
)
"""Ops whose code runs on the host only (C++, no GPU kernels): any GPU runs them."""

_CUDA = re.compile(r"(\d+)\.(\d+)([af]?)(\+PTX)?", re.I)


def summary(ops: dict[str, Any] | None) -> str:
    """One line for people: `cpu_adam, fused_adam (cuda; 8.0;9.0)`."""
    if ops is None:
        return "-"
    names = list(ops.get("ops") or [])
    if not names:
        return "none (compiled just in time)"
    where = [str(ops.get("accelerator") or "no accelerator recorded")]
    if ops.get("arch"):
        where.append(";".join(ops["arch"]))
    return f"{', '.join(names)} ({'; '.join(where)})"


def fields(ops: dict[str, Any]) -> dict[str, str]:
    """The comparable values under their readable names (FIELDS)."""
    return {
        FIELDS["ops"]: ", ".join(ops.get("ops") or []) or "none",
        FIELDS["accelerator"]: str(ops.get("accelerator") or "none"),
        FIELDS["arch"]: ";".join(ops.get("arch") or []) or "none",
    }


def device_arch(name: str) -> str:
    """A device's architecture as the image's list names it: ROCm's gcnArchName
    ("gfx942:sramecc+:xnack-") without its features; a CUDA "9.0" as it is."""
    return name.split(":", 1)[0].strip()


def coverage(archs: Sequence[str], device: str) -> Coverage:
    """Whether code built for archs runs on device.

    CUDA (device "M.m"): a cubin for M.n runs on M.m when n <= m (later minors of
    the same major), one for M.na ("9.0a") only on exactly M.n; PTX for A.B
    ("A.B+PTX") is compiled forward by the driver for any device at or above A.B.
    ROCm (device "gfx942"): only the same gfx target.
    """
    device = device_arch(device)
    wanted = _CUDA.fullmatch(device)
    if wanted is None:
        return "native" if device in {device_arch(a) for a in archs} else "none"
    have = (int(wanted.group(1)), int(wanted.group(2)))
    found: Coverage = "none"
    for entry in archs:
        match = _CUDA.fullmatch(entry.strip())
        if match is None:
            continue
        built = (int(match.group(1)), int(match.group(2)))
        suffix = match.group(3).lower()
        exact = built == have if suffix == "a" else built[0] == have[0] and built[1] <= have[1]
        if exact:
            return "native"
        if match.group(4) and built <= have:
            found = "ptx"
    return found


def unsuited(
    ops: dict[str, Any] | None,
    *,
    runs: str | None,
    arch: str | None,
    device: str,
    word: str | None,
) -> tuple[Literal["fail", "warn"], str] | None:
    """Why DeepSpeed cannot use the prebuilt ops on a rank whose DeepSpeed runs on the
    accelerator runs, with a device of architecture arch (named device; word: GPU, HPU,
    or None for CPU ranks): (severity, what), or None where it can or nothing is prebuilt.

    Ops built for another accelerator are compiled just in time (a warning on CPU
    ranks, which may be a rehearsal's stand-in for the nodes' devices). Ops with GPU
    kernels fail on a device none of the architectures covers (no kernel image for
    it), and are a warning where only PTX covers it; host-only ops run anywhere.
    """
    names = ", ".join((ops or {}).get("ops") or [])
    if ops is None or not names:
        return None
    built = ops.get("accelerator")
    if runs and built != runs:
        what = (
            f"the image's DeepSpeed ops ({names}) are built for {built or 'no accelerator'}, "
            f"its ranks run {runs}: DeepSpeed will compile them just in time at every "
            f"start; rebuild the image with its ops built for {runs}"
        )
        return ("warn" if word is None else "fail", what)
    archs = list(ops.get("arch") or [])
    kernels = ", ".join(n for n in ops["ops"] if n not in HOST_OPS and not n.startswith("cpu_"))
    if not arch or not archs or not kernels:
        return None
    covered = coverage(archs, arch)
    if covered == "native":
        return None
    said = (
        f"its {word or 'device'}s are {arch} ({device or '?'}); the image's DeepSpeed ops "
        f"({kernels}) are built for {';'.join(archs)} (image.archs)"
    )
    if covered == "ptx":
        return (
            "warn",
            f"{said}, as PTX the driver compiles for {arch} at the first use in every fresh "
            f"container: add {arch} and rebuild to skip that",
        )
    return ("fail", f"{said}: add {arch} and rebuild")

"""What every platform (accelerator) says about itself, and what they share.

A platform is one module in this package holding one ``Platform`` subclass
instance named ``PLATFORM``: its base images and OS, the spec keys it owns
(``image.cuda``), its spec problems, how it resolves torch, what it adds to
the image, the flags its containers need under Docker and Apptainer, its
Slurm resources, the run-time variables it adds, and what stands in for it
when a rehearsal runs on a machine without its hardware. The defaults here
are a plain CPU machine's; a platform overrides only what differs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from builder import architectures
from builder.collectives import gloo
from builder.deepspeed_ops import NOT_BUILT, OPS
from builder.model import did_you_mean

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from builder.collectives import Collective
    from builder.model import Extra
    from builder.spec.records import ImageSpec

VERSION_PATTERN = r"^[0-9][a-z0-9.+-]*$"
"""A release: a digit first, then digits, letters, dots, '+' and '-' (2.14.1, 12.6.3,
2.6.0+rocm6.2.4). One run of one class: matching stays linear, however long the input."""
TORCH_INDEX_ROOT = "https://download.pytorch.org/whl"
FROM_BASE = "from-base"
"""image.torch for a framework base (NGC's PyTorch images): its torch is kept."""
TORCH_MIN_PYTHON = {"2.15": "3.11"}
"""torch minor -> the oldest Python its wheels are built for (PyPI's files for torch
2.15.0 start at cp311; older minors still cover every OS builder knows)."""
Problems = list[tuple[str, str]]
"""(field path, what to do) pairs."""


@dataclass(frozen=True)
class ProbeSizes:
    """What the preflight probe moves on one device of a platform: enough to reach the
    device's speed within the budget, little enough that a CPU rank is done in seconds."""

    matmul: int
    """The square matrix size (quick runs use half)."""
    copy_bytes: int
    """The device memory copy (quick runs a quarter)."""
    sweep: tuple[int, int]
    """All-reduce sizes in bytes (smallest, largest), by 4x steps; quick stops at 1/64."""
    link_bytes: int
    """One transfer between two nodes' first ranks."""

    def args(self) -> tuple[str, ...]:
        """The probe's options that carry them."""
        low, high = self.sweep
        return (
            "--matmul",
            str(self.matmul),
            "--copy-bytes",
            str(self.copy_bytes),
            "--sweep",
            f"{low}:{high}",
            "--link-bytes",
            str(self.link_bytes),
        )


CPU_PROBE = ProbeSizes(
    matmul=512, copy_bytes=64 << 20, sweep=(1 << 12, 1 << 26), link_bytes=8 << 20
)
ACCELERATOR_PROBE = ProbeSizes(
    matmul=8192, copy_bytes=1 << 30, sweep=(1 << 16, 1 << 30), link_bytes=256 << 20
)


@dataclass(frozen=True)
class OSRelease:
    """A base OS we know: its python3 and whether pip may touch the system Python."""

    python: str
    pep668: bool


OSES: dict[str, OSRelease] = {
    "ubuntu22.04": OSRelease(python="3.10", pep668=False),
    "ubuntu24.04": OSRelease(python="3.12", pep668=True),
    "bookworm": OSRelease(python="3.11", pep668=True),
}


@dataclass(frozen=True)
class ResolvedImage:
    """An ImageSpec with every default decided; what the recipe is built from."""

    accelerator: str
    base: str
    os: str | None
    python: str | None
    torch: str | None
    """None: the base image's own torch is used (never reinstalled)."""
    torch_index: str | None
    deepspeed: str | None
    deepspeed_requirement: str | None
    """What pip installs for DeepSpeed: a PyPI pin or a fork's git URL."""
    system_packages: tuple[str, ...]
    """OS packages the platform adds to every image of it (beside builder's own)."""
    build_packages: tuple[str, ...]
    """OS packages the python stage needs only while building (git for a fork)."""
    system_site_packages: bool
    env: dict[str, str] = field(default_factory=dict)
    deepspeed_ops: tuple[str, ...] = ()
    """DeepSpeed ops compiled into the image (none: each is compiled at first use)."""
    archs: tuple[str, ...] = ()
    """GPU architectures those ops (and any compiled later) are built for."""
    ops_build_env: dict[str, str] = field(default_factory=dict)
    """Variables of DeepSpeed's install that build the ops (DS_BUILD_*, DS_ACCELERATOR, the
    architectures)."""

    @property
    def framework_base(self) -> bool:
        """The base is a framework image (NGC's PyTorch, Habana's): it brings torch, and
        may bring its own rdma-core, libfabric, NCCL plugin and MPI, which the build looks
        for before it installs any (``builder.fabrics.Userspace``)."""
        return self.torch is None


class Platform:
    """A plain CPU machine; every accelerator's module subclasses this."""

    name: ClassVar[str]
    version_keys: ClassVar[tuple[Extra, ...]] = ()
    """Keys of ``image`` this platform owns (its toolkit or SDK release)."""
    hashed_when_unset: ClassVar[tuple[str, ...]] = ()
    """Of version_keys, those format 1 hashed even when unset (null): kept, so that the
    spec hash of an unchanged spec never changes with a new builder."""
    base_family: ClassVar[re.Pattern[str] | None] = None
    """Recognises this platform's base images (a Gaudi stack on a CUDA base is an error)."""
    default_os: ClassVar[str | None] = None
    system_site_packages: ClassVar[bool] = False
    """The venv sees the base image's packages (a vendor torch in the base)."""
    docker_flags: ClassVar[tuple[str, ...]] = ("--ipc", "host")
    """`docker run` flags a training container needs (host networking comes from the plan)."""
    apptainer_flags: ClassVar[tuple[str, ...]] = ()
    device_variables: ClassVar[tuple[str, ...]] = ()
    """What Slurm sets in a task for the devices the job was given (its GRES plugin): a
    runtime that starts clean (apptainer --cleanenv) passes them in, where set, so that
    a rank opens its own devices and not another job's."""
    gpus_per_slot: ClassVar[bool] = False
    """Slurm gets a GPU per slot unless launch.slurm.gpus_per_node says otherwise (0: none)."""
    stand_in: ClassVar[str] = "cpu"
    """The platform a rehearsal runs instead, on a machine without this hardware."""
    rehearsal_env: ClassVar[tuple[tuple[str, str], ...]] = ()
    """Variables a rehearsal adds so that the stack runs on its stand-in."""
    collective: ClassVar[Collective] = gloo.COLLECTIVE
    """The library of the ranks' collectives between nodes (``builder.collectives``):
    what a fabric needs for it, and what preflight and the fingerprint read of it."""
    torch_device: ClassVar[str] = "cpu"
    """The torch device type of a rank (ROCm's torch calls its GPUs cuda)."""
    probe_sizes: ClassVar[ProbeSizes] = CPU_PROBE
    """What the preflight probe measures with on one of its devices."""
    device_word: ClassVar[str | None] = None
    """What preflight calls one device ("7 of 8 GPUs visible"); None: no devices to count."""
    env_prefixes: ClassVar[tuple[str, ...]] = ()
    """Its runtime's and SDK's variables (CUDA_, HABANA_), recorded in a fingerprint."""
    architectures: ClassVar[tuple[str, ...]] = architectures.PLATFORMS
    """The CPU architectures (image.platforms) its base images and torch wheels exist for."""
    architectures_why: ClassVar[str] = ""
    """Why an architecture it lacks is lacking (its vendor's releases), for the message."""
    kubernetes_resource: ClassVar[str | None] = None
    """The extended resource its vendor's Kubernetes device plugin advertises one device
    under (a pod asks for one per slot); None: no devices to ask for."""
    kubernetes_capabilities: ClassVar[tuple[str, ...]] = ()
    """Capabilities a pod's container adds for it (what its docker flags --cap-add)."""

    @property
    def socket_variables(self) -> tuple[str, ...]:
        """What launch.socket_ifname sets: the interface of every collective library the
        platform's ranks use (its own, and torch's gloo everywhere)."""
        return tuple(dict.fromkeys((self.collective.socket_variable, gloo.SOCKET_VARIABLE)))

    # -- the image ----------------------------------------------------------

    def default_base(self, image: ImageSpec) -> str:
        """The base image a stack gets when it names none."""
        raise NotImplementedError

    def os_of(self, image: ImageSpec) -> str | None:
        """The base image's OS: the spec's, the default base's, or read from the base's name;
        None when it cannot be told (then the Python version is not checked)."""
        if image.os:
            return image.os
        if image.base is None:
            return self.default_os
        return next((name for name in OSES if name in image.base), None)

    def problems(self, image: ImageSpec) -> Problems:
        """What this platform cannot build from image (the shared checks are in spec.check)."""
        if image.torch is None:
            return [("image.torch", 'set the torch version, e.g. torch: "2.15.0"')]
        if image.torch == FROM_BASE and image.base is None:
            return [
                (
                    "image.torch",
                    "from-base keeps the torch of a framework base image: set image.base to "
                    "it, e.g. nvcr.io/nvidia/pytorch:25.10-py3",
                )
            ]
        if image.torch == FROM_BASE and image.torch_index is not None:
            return [("image.torch_index", "torch comes from the base (from-base): remove it")]
        return []

    def architecture_problem(self, platform: str) -> str | None:
        """Why this platform's images cannot be built for platform (a CPU architecture),
        or None when they can."""
        if platform in self.architectures:
            return None
        return (
            f"{self.name} images exist for {', '.join(self.architectures)} only: "
            f"{self.architectures_why or 'its vendor publishes no other'}"
        )

    def architecture_problems(self, image: ImageSpec) -> Problems:
        """image.platforms against the architectures this platform exists for."""
        problems: Problems = []
        for index, platform in enumerate(image.platforms or ()):
            why = self.architecture_problem(platform)
            if why is not None:
                problems.append((f"image.platforms[{index}]", f"{platform}: {why}"))
        return problems

    def torch_index(self, image: ImageSpec) -> str | None:
        """The pip index torch comes from (image.torch is set)."""
        return image.torch_index

    def installs_torch(self, image: ImageSpec) -> bool:
        """False where the base image brings its own torch build (torch: from-base)."""
        return image.torch != FROM_BASE

    def deepspeed_requirement(self, version: str) -> str:
        return f"deepspeed=={version}"

    # -- DeepSpeed's ops --------------------------------------------------------

    deepspeed_ops: ClassVar[tuple[str, ...]] = (
        "cpu_adagrad",
        "cpu_adam",
        "cpu_lion",
        "deepspeed_shm_comm",
    )
    """The ops of builder.deepspeed_ops this platform's images can have compiled in."""
    default_deepspeed_ops: ClassVar[tuple[str, ...]] = ("cpu_adam", "deepspeed_shm_comm")
    """What an image with DeepSpeed gets when image.deepspeed_ops is unset."""
    ds_accelerator: ClassVar[str] = "cpu"
    """DeepSpeed's accelerator the ops are built for (DS_ACCELERATOR): an image build sees
    no GPU, and DeepSpeed would pick cpu, recording ops that a GPU node then recompiles."""
    arch_variable: ClassVar[str | None] = None
    """The variable that names the GPU architectures to compile for (TORCH_CUDA_ARCH_LIST,
    PYTORCH_ROCM_ARCH); None where there is no GPU to compile for."""

    def default_archs(self, image: ImageSpec) -> tuple[str, ...]:  # noqa: ARG002
        """The architectures an image gets when image.archs is unset."""
        return ()

    def arch_problems(self, archs: tuple[str, ...], image: ImageSpec) -> Problems:  # noqa: ARG002
        """What is wrong with image.archs for this platform (arch_variable is set)."""
        return []

    def ops_of(self, image: ImageSpec) -> tuple[str, ...]:
        """The ops compiled into image: the spec's, else the platform's default (none
        without DeepSpeed, which a checked spec does not list ops for)."""
        if not image.deepspeed:
            return ()
        if image.deepspeed_ops is not None:
            return image.deepspeed_ops
        return self.default_deepspeed_ops

    def archs_of(self, image: ImageSpec) -> tuple[str, ...]:
        """The GPU architectures of image: the spec's, else the default where DeepSpeed is."""
        if image.archs is not None:
            return image.archs
        return self.default_archs(image) if image.deepspeed and self.arch_variable else ()

    def deepspeed_problems(self, image: ImageSpec) -> Problems:
        """image.deepspeed_ops and image.archs against DeepSpeed and this platform."""
        problems: Problems = []
        if image.deepspeed_ops and not image.deepspeed:
            problems.append(
                ("image.deepspeed_ops", "there is no DeepSpeed in the image: set image.deepspeed")
            )
        for index, name in enumerate(image.deepspeed_ops or ()):
            where = f"image.deepspeed_ops[{index}]"
            if name in NOT_BUILT:
                problems.append((where, f"{name} {NOT_BUILT[name]}"))
            elif name not in OPS:
                problems.append(
                    (
                        where,
                        f"{name} is not one of DeepSpeed's ops; {self.name} images can have "
                        f"{', '.join(self.deepspeed_ops) or 'none'}"
                        + did_you_mean(name, self.deepspeed_ops or OPS),
                    )
                )
            elif name not in self.deepspeed_ops:
                problems.append(
                    (
                        where,
                        f"{name} is not built for {self.name} images; they can have "
                        f"{', '.join(self.deepspeed_ops) or 'none'}",
                    )
                )
        if self.arch_variable and self.archs_of(image) and self.arch_variable in image.env:
            problems.append(
                (
                    f"image.env.{self.arch_variable}",
                    f"the architectures are image.archs (which sets {self.arch_variable}): "
                    "move them there",
                )
            )
        if image.archs is None:
            return problems
        if self.arch_variable is None:
            if image.archs:
                problems.append(
                    (
                        "image.archs",
                        f"{self.name} images are not compiled for GPU architectures: remove it",
                    )
                )
            return problems
        twice = sorted({arch for arch in image.archs if image.archs.count(arch) > 1})
        if twice:
            problems.append(("image.archs", f"listed twice: {', '.join(twice)}"))
        device = [op for op in self.ops_of(image) if op in OPS and OPS[op].device]
        if not image.archs and device:
            problems.append(
                (
                    "image.archs",
                    f"[] leaves the architectures of {', '.join(device)} to DeepSpeed's own "
                    "guess, for GPUs of years ago that today's toolkits no longer compile "
                    f"for: list the nodes' GPUs, e.g. {list(self.default_archs(image))}",
                )
            )
        return problems + self.arch_problems(image.archs, image)

    def ops_build_env(self, ops: tuple[str, ...], archs: tuple[str, ...]) -> dict[str, str]:
        """The variables of DeepSpeed's install that compile ops for archs (none: nothing
        is compiled, DS_BUILD_OPS=0 alone)."""
        env = {"DS_BUILD_OPS": "0"}
        if ops:
            env["DS_ACCELERATOR"] = self.ds_accelerator
            env |= {OPS[name].build_var: "1" for name in ops}
        if archs and self.arch_variable:
            env[self.arch_variable] = ";".join(archs)
        return env

    openmpi_packages: ClassVar[tuple[str, ...]] = ("openmpi-bin", "libopenmpi-dev")
    """The distribution's OpenMPI, for image.openmpi (mpirun and mpicc for mpi4py; what
    ``builder.image.tools.OPENMPI`` installs on this platform)."""

    def system_packages(self, image: ImageSpec) -> tuple[str, ...]:  # noqa: ARG002
        """OS packages of the final image that this platform needs."""
        return ()

    def build_packages(self, image: ImageSpec) -> tuple[str, ...]:  # noqa: ARG002
        """OS packages the python stage needs while building, never in the final image."""
        return ()

    def resolve(self, image: ImageSpec) -> ResolvedImage:
        """Fill in every default; assumes the spec checks found no problems."""
        os_name = self.os_of(image)
        torch = image.torch if self.installs_torch(image) else None
        index = self.torch_index(image) if torch else None
        deepspeed = image.deepspeed
        ops, archs = self.ops_of(image), self.archs_of(image)
        env = dict(image.env)
        if archs and self.arch_variable:  # what a later just-in-time compile targets too
            env[self.arch_variable] = ";".join(archs)
        return ResolvedImage(
            accelerator=self.name,
            base=image.base or self.default_base(image),
            os=os_name,
            python=image.python or (OSES[os_name].python if os_name in OSES else None),
            torch=torch,
            torch_index=index,
            deepspeed=deepspeed,
            deepspeed_requirement=self.deepspeed_requirement(deepspeed) if deepspeed else None,
            system_packages=self.system_packages(image),
            build_packages=self.build_packages(image) if deepspeed else (),
            # a kept torch lives in the base's own site-packages: the venv must see it
            system_site_packages=self.system_site_packages or not self.installs_torch(image),
            env=env,
            deepspeed_ops=ops,
            archs=archs,
            ops_build_env=self.ops_build_env(ops, archs) if deepspeed else {},
        )

    # -- running it ---------------------------------------------------------

    def slurm_options(self, slots: int, gpus_per_node: int | None) -> list[str]:
        """#SBATCH resource options (beyond nodes and tasks) for nodes of slots ranks
        (gpus_per_node: launch.slurm's, None unless the spec sets it)."""
        gpus = gpus_per_node
        if gpus is None and self.gpus_per_slot:
            gpus = slots
        return [f"--gpus-per-node={gpus}"] if gpus else []

    def run_env(self) -> dict[str, str]:
        """Variables every rank gets unless launch.env sets them (its vendor's advice)."""
        return {}

    mnnvl_env: ClassVar[tuple[tuple[str, str], ...] | None] = None
    """What launch.mnnvl (multi-node NVLink through IMEX channels) sets; None: the platform
    has none."""
    mnnvl_binds: ClassVar[tuple[str, ...]] = ()
    """Host device folders a runtime that binds paths itself (apptainer) gives for it."""

    def forwarded_env(self, image_env: Mapping[str, str] | None) -> dict[str, str]:  # noqa: ARG002
        """What .deepspeed_env must carry for this platform: variables the nodes' ranks need
        that DeepSpeed does not forward by itself (read from the image's ENV when given)."""
        return {}

    def torch_build(self, torch: Mapping[str, object], packages: Mapping[str, str]) -> str | None:  # noqa: ARG002
        """How a fingerprint's torch build reads when it is this platform's, else None."""
        return None


def wheel_problems(
    image: ImageSpec,
    *,
    key: str,
    toolkit: str,
    table: Mapping[str, tuple[str, ...]],
    choose: Callable[[str, str], str | None],
    kind: str,
) -> Problems:
    """image.torch against a platform's wheel table (torch minor -> indexes): a release the
    table has, with an index that fits the base's toolkit (image.<key>). A user-chosen
    index is the user's to know."""
    if image.torch in (None, FROM_BASE) or image.torch_index is not None:
        return []
    indexes = table.get(minor_of(image.torch))
    if indexes is None:
        return [
            (
                "image.torch",
                f"torch {image.torch} is not in builder's {kind} wheel table "
                f"({', '.join(table)}); pick one of those or set "
                "image.torch_index to the index that has it",
            )
        ]
    if choose(image.torch, toolkit) is None:
        return [
            (
                "image.torch",
                f"torch {image.torch} has no wheels for {kind} {toolkit} (it is built for "
                f"{', '.join(indexes)}): change image.{key} or image.torch",
            )
        ]
    return []


def minor_of(version: str) -> str:
    """2.14.1 -> 2.14"""
    return ".".join(version.split(".")[:2])


def version_key(version: str) -> tuple[int, ...]:
    """6.2.4 -> (6, 2, 4), for comparing releases."""
    return tuple(int(part) for part in re.findall(r"\d+", version))

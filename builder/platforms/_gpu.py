"""What the GPU platforms whose torch comes from PyTorch's wheel indexes share (CUDA and
ROCm): one toolkit key on the image (image.cuda, image.rocm) with a default, the
vendor's devel images by toolkit release and OS, the wheel index chosen for the
toolkit, a GPU per Slurm slot, ranks on torch's cuda device, and a CPU stand-in that
compiles DeepSpeed's ops for cpu. Each platform module says only what differs.

Not a platform itself: its module name starts with '_', which plug-in discovery skips.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from builder.platforms.base import (
    ACCELERATOR_PROBE,
    TORCH_INDEX_ROOT,
    Platform,
    Problems,
    wheel_problems,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from builder.spec.records import ImageSpec


class WheelIndexedGpu(Platform):
    """A GPU platform with a toolkit release on its base and torch from a wheel index."""

    toolkit_key: ClassVar[str]
    """The image key of the base's toolkit release (cuda, rocm)."""
    default_toolkit: ClassVar[str]
    default_os: ClassVar[str]
    devel_tags: ClassVar[dict[str, tuple[str, ...]]]
    """Toolkit release -> the OSes the vendor's devel image of it exists for."""
    wheel_indexes: ClassVar[dict[str, tuple[str, ...]]]
    """torch minor -> the wheel indexes that carry it."""
    wheel_kind: ClassVar[str]
    """The toolkit's name in messages (CUDA, ROCm)."""
    choose_index: ClassVar[Callable[[str, str], str | None]]
    """(torch, toolkit) -> the wheel index that fits, or None."""
    gpus_per_slot = True
    rehearsal_env = (("DS_ACCELERATOR", "cpu"),)
    torch_device = "cuda"  # ROCm's torch calls its GPUs cuda too
    probe_sizes = ACCELERATOR_PROBE
    device_word = "GPU"
    ds_accelerator = "cuda"  # DeepSpeed's ROCm builds go through its cuda accelerator

    def toolkit(self, image: ImageSpec) -> str:
        """The toolkit release of the image's base: the image key's, else the default."""
        return image.versions.get(self.toolkit_key, self.default_toolkit)

    def no_devel_image(self, toolkit: str) -> str:
        """What to say of a toolkit release the vendor has no devel image of."""
        raise NotImplementedError

    def devel_image(self, toolkit: str) -> str:
        """How the devel image of a toolkit release is named in messages."""
        raise NotImplementedError

    def torch_index(self, image: ImageSpec) -> str | None:
        if image.torch_index:
            return image.torch_index
        index = type(self).choose_index(image.torch or "", self.toolkit(image))
        return f"{TORCH_INDEX_ROOT}/{index}"

    def problems(self, image: ImageSpec) -> Problems:
        problems: Problems = []
        toolkit = self.toolkit(image)
        if image.base is None:
            oses = self.devel_tags.get(toolkit)
            if oses is None:
                problems.append((f"image.{self.toolkit_key}", self.no_devel_image(toolkit)))
            elif (image.os or self.default_os) not in oses:
                problems.append(
                    ("image.os", f"{self.devel_image(toolkit)} exists for {', '.join(oses)}")
                )
        return (
            problems
            + super().problems(image)
            + self.toolkit_problems(image)
            + wheel_problems(
                image,
                key=self.toolkit_key,
                toolkit=toolkit,
                table=self.wheel_indexes,
                choose=type(self).choose_index,
                kind=self.wheel_kind,
            )
        )

    def toolkit_problems(self, image: ImageSpec) -> Problems:  # noqa: ARG002
        """What the toolkit itself cannot do with the image (CUDA: DeepSpeed's nvcc check)."""
        return []

"""DeepSpeed's ops that builder compiles into an image, as DeepSpeed 0.19's own op
builders and setup.py define them (deepspeed/ops/op_builder, setup.py's op_envvar).

Each op is built at install time by its builder's ``BUILD_VAR`` (not always
``DS_BUILD_`` + its name: deepspeed_shm_comm is DS_BUILD_SHM_COMM). setup.py
skips an op it finds incompatible with a warning, or silently when its variable
is set, so the image's build checks afterwards that every op asked for is in
DeepSpeed's record (git_version_info_installed.py) for the accelerator asked for.

Which ops a platform builds is the platform's (``Platform.deepspeed_ops``);
the ops here that no platform builds need what builder does not install.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Op:
    """One of DeepSpeed's ops: the variable that builds it, and whether its kernels are
    compiled for the GPU architectures (nvcc or hipcc) or for the build machine's CPU."""

    name: str
    build_var: str
    device: bool
    summary: str


OPS: dict[str, Op] = {
    op.name: op
    for op in (
        Op("cpu_adam", "DS_BUILD_CPU_ADAM", False, "Adam on the CPU (ZeRO-Offload)"),
        Op("cpu_adagrad", "DS_BUILD_CPU_ADAGRAD", False, "Adagrad on the CPU"),
        Op("cpu_lion", "DS_BUILD_CPU_LION", False, "Lion on the CPU"),
        Op(
            "deepspeed_shm_comm",
            "DS_BUILD_SHM_COMM",
            False,
            "shared-memory collectives of the CPU accelerator, built at init_distributed",
        ),
        Op("fused_adam", "DS_BUILD_FUSED_ADAM", True, "fused Adam on the GPU"),
        Op("fused_lamb", "DS_BUILD_FUSED_LAMB", True, "fused LAMB on the GPU"),
        Op("fused_lion", "DS_BUILD_FUSED_LION", True, "fused Lion on the GPU"),
        Op("transformer", "DS_BUILD_TRANSFORMER", True, "the legacy transformer kernels"),
        Op(
            "stochastic_transformer",
            "DS_BUILD_STOCHASTIC_TRANSFORMER",
            True,
            "the legacy stochastic transformer kernels",
        ),
        Op(
            "transformer_inference",
            "DS_BUILD_TRANSFORMER_INFERENCE",
            True,
            "inference kernels (DeepSpeed-Inference)",
        ),
        Op("inference_core_ops", "DS_BUILD_INFERENCE_CORE_OPS", True, "inference core ops"),
        Op("ragged_ops", "DS_BUILD_RAGGED_OPS", True, "ragged batching ops (FastGen)"),
        Op("spatial_inference", "DS_BUILD_SPATIAL_INFERENCE", True, "spatial inference ops"),
        Op("quantizer", "DS_BUILD_QUANTIZER", True, "quantizer kernels"),
        Op("random_ltd", "DS_BUILD_RANDOM_LTD", True, "random layer token drop"),
        Op("utils", "DS_BUILD_UTILS", False, "flatten/unflatten utilities (ZeRO-3)"),
    )
}
"""The ops builder knows how to compile: they need a compiler and, for device ops, the
toolkit of a devel base image, nothing more."""

NOT_BUILT: dict[str, str] = {
    "async_io": "needs libaio-dev in the image (DS_BUILD_AIO); add it to image.apt and let "
    "DeepSpeed compile it at first use",
    "gds": "needs NVIDIA's cuFile (GPUDirect Storage) libraries in the image",
    "evoformer_attn": "needs CUTLASS 3.1 or newer (CUTLASS_PATH) while building",
    "cutlass_ops": "needs the deepspeed-kernels package while building",
    "ragged_device_ops": "needs the deepspeed-kernels package while building",
    "fp_quantizer": "is checked against a visible GPU of compute capability 8.0 or newer, "
    "which an image build does not have",
    "dc": "(DeepCompile) is left out of DeepSpeed's own prebuilt CI builds",
    "pin_memory": "is built with async_io or gds only",
    "deepspeed_ccl_comm": "needs Intel oneCCL (oneapi/ccl.hpp) while building",
    "deepspeed_not_implemented": "is DeepSpeed's placeholder for ops an accelerator lacks",
}
"""DeepSpeed's other ops, and why builder does not compile them into images."""

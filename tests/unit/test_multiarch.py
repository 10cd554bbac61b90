"""Images for several CPU architectures, engine-free: image.platforms and what each
platform allows, the per-architecture build inputs and tags, the manifest-list push and
its record, and multi-node NVLink (launch.mnnvl). The real builds under qemu, the real
registry and the 2-node rehearsal are in tests/integration/test_multiarch.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from builder import architectures
from builder.engine.build import build_platforms, check_base_architecture
from builder.engine.push import push_and_record
from builder.errors import BuildError, NotInEngine, SpecError, UsageError
from builder.image.inputs import BuildInputs, Wheel, load_inputs
from builder.image.pin import read_pin, write_pin
from builder.image.recipe import spec_hash
from builder.image.registry import Pushed
from builder.launch.plan import launch_plan
from builder.payload.preflight import transport
from builder.preflight.probe import Settings, expected_of
from builder.preflight.report import MARK, judge
from builder.resolved import resolve
from builder.spec.loader import load_preset, spec_from_dict
from tests.fakes import FakeEngine, FakeImage

if TYPE_CHECKING:
    from collections.abc import Iterator

    from builder.spec.records import Spec

AMD = "linux/amd64"
ARM = "linux/arm64"


def stack(accelerator: str = "cpu", **image: Any) -> dict[str, Any]:
    versions = {"cpu": {}, "cuda": {}, "rocm": {}, "gaudi": {"synapse": "1.22.0"}}
    torch = {"gaudi": None}.get(accelerator, "2.13.0")
    data: dict[str, Any] = {"accelerator": accelerator, **versions[accelerator], **image}
    if torch and "torch" not in image:
        data["torch"] = torch
    return {"name": "t", "image": data, "launch": {"launcher": "torchrun"}}


def problems_of(data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as caught:
        spec_from_dict(data)
    return str(caught.value)


# -- the spec ----------------------------------------------------------------


def test_the_names_of_an_architecture_all_mean_it() -> None:
    for name in ("linux/arm64", "arm64", "aarch64", "AArch64"):
        assert architectures.named(name) is architectures.ARM64
    for name in ("linux/amd64", "amd64", "x86_64"):
        assert architectures.named(name) is architectures.AMD64
    assert architectures.named("riscv64") is None
    assert architectures.tagged("r/x:1", architectures.ARM64) == "r/x:1-arm64"


@pytest.mark.parametrize(
    ("platforms", "says"),
    [
        (["linux/riscv64"], "'linux/riscv64' is not a platform builder builds for"),
        (["aarch64"], "aarch64 is linux/arm64"),
        ([], "[] builds nothing"),
        ([AMD, AMD], "listed twice: linux/amd64"),
        ("linux/arm64", "image.platforms"),
    ],
)
def test_platforms_builder_does_not_know_are_refused_naming_the_field(
    platforms: Any, says: str
) -> None:
    said = problems_of(stack(platforms=platforms))
    assert "image.platforms" in said
    assert says in said


@pytest.mark.parametrize("accelerator", ["gaudi", "rocm"])
def test_arm64_with_a_platform_that_has_none_is_refused_with_the_reason(
    accelerator: str,
) -> None:
    said = problems_of(stack(accelerator, platforms=[AMD, ARM]))
    assert "image.platforms[1]" in said
    assert f"linux/arm64: {accelerator} images exist for linux/amd64 only" in said
    assert "x86_64" in said


def test_cuda_on_arm64_needs_torch_with_aarch64_wheels_and_compiles_for_grace_gpus() -> None:
    said = problems_of(stack("cuda", platforms=[ARM], torch="2.6.0", cuda="12.6.3"))
    assert "torch 2.6.0 has no aarch64 CUDA wheels" in said
    grace = resolve(spec_from_dict(stack("cuda", platforms=[ARM], deepspeed="0.19.8")))
    assert grace.image.archs == ("9.0", "10.0")  # GH200, GB200
    both = resolve(spec_from_dict(stack("cuda", platforms=[AMD, ARM], deepspeed="0.19.8")))
    assert both.image.archs == ("8.0", "9.0", "10.0")
    old = stack("cuda", platforms=[ARM], deepspeed="0.19.8", cuda="12.6.3", torch="2.13.0")
    assert resolve(spec_from_dict(old)).image.archs == ("9.0",)  # 10.0 needs CUDA 12.8


def test_platforms_are_sorted_and_hashed_only_when_set() -> None:
    plain = spec_from_dict(stack())
    both = spec_from_dict(stack(platforms=[ARM, AMD]))
    assert both.spec.image.platforms == (AMD, ARM)
    assert spec_hash(plain) != spec_hash(both)
    # a spec without the key keeps the hash an older builder gave it
    assert spec_hash(plain) == spec_hash(spec_from_dict(stack(platforms=None)))


# -- the build -------------------------------------------------------------------


def wheel(name: str) -> Wheel:
    return Wheel(Path("/w") / name, "torch", name.split("-")[1])


def test_each_architectures_inputs_hold_its_own_wheels_and_base() -> None:
    inputs = BuildInputs(
        base_image="b:amd",
        wheels=(
            wheel("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"),
            wheel("torch-2.10.0-cp311-cp311-manylinux_2_28_aarch64.whl"),
            wheel("einops-0.8.1-py3-none-any.whl"),
        ),
        platform_bases=((ARM, "b:arm"),),
    )
    arm = inputs.for_architecture(architectures.ARM64)
    assert arm.base_image == "b:arm"
    assert [w.filename for w in arm.wheels] == [
        "torch-2.10.0-cp311-cp311-manylinux_2_28_aarch64.whl",
        "einops-0.8.1-py3-none-any.whl",
    ]
    amd = inputs.for_architecture(architectures.AMD64)
    assert amd.base_image == "b:amd"
    assert [w.filename for w in amd.wheels] == [
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "einops-0.8.1-py3-none-any.whl",
    ]


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("arm64", "write PLATFORM=NAME:TAG"),
        ("linux/s390x=b:1", "write PLATFORM=NAME:TAG"),
        ("linux/arm64=b 1", "holds a space"),
    ],
)
def test_a_platform_base_that_is_not_one_is_refused(entry: str, says: str) -> None:
    with pytest.raises(UsageError) as caught:
        load_inputs(platform_bases=(entry,))
    assert "--platform-base" in str(caught.value)
    assert says in str(caught.value)
    assert load_inputs(platform_bases=("aarch64=b:1",)).platform_bases == ((ARM, "b:1"),)


class Building(FakeEngine):
    """A fake engine that builds: each build makes an image of the platform asked for."""

    def __init__(self, *images: FakeImage) -> None:
        super().__init__(*images)
        self.builds: list[str | None] = []

    def build(self, context: Any, **options: Any) -> Iterator[dict[str, Any]]:
        del context
        platform = options.get("platform")
        self.builds.append(platform)
        arch = (platform or AMD).split("/")[1]
        image = FakeImage(f"sha256:{arch}{len(self.builds)}", architecture=arch)
        self.stored[image.id] = image
        yield {"stream": "Step 1/1 : FROM x\n"}
        yield {"aux": {"ID": image.id}}


def test_several_architectures_are_built_and_tagged_each_with_name_tag_on_this_machines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(architectures, "native", lambda: architectures.AMD64)
    engine = Building(FakeImage("sha256:base", ("debian:bookworm-slim",)))
    engine.registry["debian:bookworm-slim"] = (AMD, ARM)
    spec = spec_from_dict(stack(platforms=[AMD, ARM]))
    built = build_platforms(resolve(spec), engine=engine, reference="r/t:1")
    assert engine.builds == [AMD, ARM]
    assert {p: r.reference for p, r in built.results.items()} == {
        AMD: "r/t:1-amd64",
        ARM: "r/t:1-arm64",
    }
    assert built.primary.reference == "r/t:1-amd64"
    # the engine's base is amd64, its registry has arm64 too: pulled for the arm64 build
    assert engine.called("pull") == [("pull", "debian:bookworm-slim", ARM)]
    assert engine.find("r/t:1").architecture == "amd64"
    # one architecture: tagged name:tag itself, built as the engine's own
    engine.builds.clear()
    one = build_platforms(resolve(spec_from_dict(stack())), engine=engine, reference="r/u:1")
    assert engine.builds == [None]
    assert next(iter(one.results.values())).reference == "r/u:1"


def test_this_machines_architecture_a_platform_lacks_is_refused_before_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(architectures, "native", lambda: architectures.ARM64)
    with pytest.raises(UsageError) as caught:
        build_platforms(resolve(spec_from_dict(stack("rocm"))), engine=Building())
    said = str(caught.value)
    assert said.startswith("linux/arm64 (this machine's architecture; image.platforms is unset)")
    assert "rocm images exist for linux/amd64 only" in said


def test_a_base_the_architecture_lacks_is_found_before_the_build() -> None:
    engine = Building(FakeImage("sha256:b", ("b:1",), architecture="amd64"))
    assert not check_base_architecture(engine, "b:1", architectures.AMD64)
    engine.registry["b:1"] = (AMD,)
    with pytest.raises(BuildError) as caught:
        check_base_architecture(engine, "b:1", architectures.ARM64)
    said = str(caught.value)
    assert said.startswith("base image b:1 has no linux/arm64 image")
    assert "the engine's copy is linux/amd64; its registry lists linux/amd64" in said
    assert "--platform-base linux/arm64=NAME:TAG" in said
    engine.registry["b:1"] = (AMD, ARM)  # the registry has it: pulled before the build
    assert check_base_architecture(engine, "b:1", architectures.ARM64)
    assert not check_base_architecture(engine, "c:1", architectures.ARM64)  # not held
    engine.registry["c:1"] = (ARM,)
    assert not check_base_architecture(engine, "c:1", architectures.ARM64)  # its pull
    # only the engine's copy to go by, of another architecture: refused
    del engine.registry["b:1"]
    with pytest.raises(BuildError, match="its registry cannot be asked"):
        check_base_architecture(engine, "b:1", architectures.ARM64)


# -- the push and its record ----------------------------------------------------------


def test_several_architectures_go_up_as_one_manifest_list_recorded_with_each_digest(
    tmp_path: Path,
) -> None:
    engine = FakeEngine(
        FakeImage("sha256:aa", ("reg:5000/t:1", "reg:5000/t:1-amd64"), architecture="amd64"),
        FakeImage("sha256:bb", ("reg:5000/t:1-arm64",), architecture="arm64"),
    )
    spec_file = tmp_path / "stack.yaml"
    spec_file.write_text(
        "name: t\nimage:\n  accelerator: cpu\n  torch: '2.13.0'\n  name: reg:5000/t\n"
        "  tag: '1'\n  platforms: [linux/amd64, linux/arm64]\nlaunch:\n  launcher: torchrun\n"
    )
    pushed, record = push_and_record(engine, "reg:5000/t:1", spec_file)
    assert engine.called("push") == [("push", "reg:5000/t:1-amd64"), ("push", "reg:5000/t:1-arm64")]
    (manifest,) = engine.called("manifest")
    assert manifest[1] == "reg:5000/t:1"
    assert manifest[2:] == tuple(f"reg:5000/t@{d}" for d in pushed.platforms.values())
    assert set(pushed.platforms) == {AMD, ARM}
    assert record is not None
    assert read_pin(spec_file) == pushed
    assert json.loads(record.read_text())["platforms"] == pushed.platforms


def test_an_architecture_image_of_another_architecture_is_never_listed(tmp_path: Path) -> None:
    engine = FakeEngine(
        FakeImage("sha256:aa", ("reg:5000/t:1-amd64",), architecture="amd64"),
        FakeImage("sha256:bb", ("reg:5000/t:1-arm64",), architecture="amd64"),
    )
    del tmp_path
    from builder.engine.push import push_platforms

    with pytest.raises(UsageError, match="is linux/amd64, not linux/arm64"):
        push_platforms(engine, "reg:5000/t:1", (AMD, ARM))
    with pytest.raises(NotInEngine, match=r"t:2-amd64 \(linux/amd64\) is not in the local"):
        push_platforms(engine, "reg:5000/t:2", (AMD, ARM))
    assert engine.called("push") == []


def test_a_record_with_a_platform_or_digest_that_is_not_one_is_refused(tmp_path: Path) -> None:
    spec_file = tmp_path / "stack.yaml"
    good = "sha256:" + "a" * 64
    write_pin(spec_file, Pushed("r/t:1", good, {ARM: good}))
    assert read_pin(spec_file) == Pushed("r/t:1", good, {ARM: good})
    for platforms in ({"linux/s390x": good}, {ARM: "sha256:x"}, [ARM]):
        data = {"schema": 1, "reference": "r/t:1", "digest": good, "platforms": platforms}
        spec_file.with_suffix(".digest").write_text(json.dumps(data))
        with pytest.raises(UsageError, match="not the record `builder push` writes"):
            read_pin(spec_file)


# -- multi-node NVLink (launch.mnnvl) ----------------------------------------------------


def mnnvl_spec(runtime: str = "docker") -> Spec:
    spec = load_preset("cuda-torchrun").spec
    launch = replace(spec.launch, mnnvl=True, runtime=runtime, nodes=("n1", "n2"))
    return replace(spec, launch=launch)


def test_mnnvl_gives_docker_the_imex_channel_and_makes_nccl_use_it() -> None:
    text = launch_plan(resolve(mnnvl_spec()), image="i:1", cluster_dir="/c").text()
    for pair in ("NVIDIA_IMEX_CHANNELS=0", "NCCL_MNNVL_ENABLE=1", "NCCL_CUMEM_ENABLE=1"):
        assert pair in text
    plain = replace(mnnvl_spec(), launch=replace(mnnvl_spec().launch, mnnvl=False))
    assert "IMEX" not in launch_plan(resolve(plain), image="i:1", cluster_dir="/c").text()


def test_mnnvl_binds_the_channels_under_apptainer() -> None:
    spec = mnnvl_spec("apptainer")
    spec = replace(spec, launch=replace(spec.launch, sif="/shared/t.sif"))
    text = launch_plan(resolve(spec), image="i:1", cluster_dir="/c").text()
    assert "--nv --bind /dev/nvidia-caps-imex-channels" in text


def test_mnnvl_is_nvidias_only() -> None:
    said = problems_of({**stack(), "launch": {"launcher": "torchrun", "mnnvl": True}})
    assert "launch.mnnvl" in said
    assert "cpu images have none" in said


def nccl_lines(tmp_path: Path, text: str) -> dict[str, object]:
    (tmp_path / "builder-preflight.0.nccl").write_text(text)
    return transport(str(tmp_path))


def test_the_probe_reads_mnnvl_and_nvls_from_nccls_lines(tmp_path: Path) -> None:
    # the lines as NCCL 2.30 prints them (src/init.cc, src/transport/p2p.cc, nvls.cc)
    used = nccl_lines(
        tmp_path,
        "n1:1:1 [0] NCCL INFO comm 0x5 rank 0 nRanks 8 nNodes 2 localRanks 4 localRank 0 MNNVL 1\n"
        "n1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 4[0] via P2P/MNNVL\n"
        "n1:1:1 [0] NCCL INFO NVLS comm 0x5 headRank 0 nHeads 4 buffSize 1048576\n",
    )
    assert (used["mnnvl"], used["nvls"]) == (True, True)
    unused = nccl_lines(
        tmp_path,
        "n1:1:1 [0] NCCL INFO comm 0x5 rank 0 nRanks 8 nNodes 2 localRanks 4 localRank 0 MNNVL 0\n"
        "n1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 4[0] [send] via NET/IB/0\n",
    )
    assert (unused["mnnvl"], unused["nvls"]) == (False, False)


def test_a_node_whose_nccl_did_not_use_mnnvl_is_named(tmp_path: Path) -> None:
    del tmp_path
    resolved = resolve(mnnvl_spec())
    want = expected_of(
        resolved.platform,
        ("n1", "n2"),
        1,
        fabric="none",
        env=resolved.run_environment(),
        settings=Settings(),
    )
    assert want.mnnvl
    reports = [
        {"rank": rank, "node": node, "transport": {"net": [], "mnnvl": node == "n1", "nvls": False}}
        for rank, node in enumerate(("n1", "n2"))
    ]
    output = "".join(f"{MARK}{json.dumps(r)}\n" for r in reports)
    found = judge(output, want, [])
    failing = [f.text() for f in found.findings if f.severity == "fail"]
    assert any(t.startswith("n2: NCCL did not use multi-node NVLink") for t in failing)
    assert not any(t.startswith("n1: NCCL did not use") for t in failing)
    assert any("no NVLink SHARP (NVLS)" in f.what for f in found.findings)


def test_a_builds_cpu_weight_is_an_integer_the_kernel_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from builder.engine.docker import build_cpu_shares

    monkeypatch.delenv("BUILDER_BUILD_CPU_SHARES", raising=False)
    assert build_cpu_shares() is None
    monkeypatch.setenv("BUILDER_BUILD_CPU_SHARES", "64")
    assert build_cpu_shares() == 64
    for bad in ("1", "1025", "-5", "lots", "64\n; id"):
        monkeypatch.setenv("BUILDER_BUILD_CPU_SHARES", bad)
        with pytest.raises(UsageError, match=r"BUILDER_BUILD_CPU_SHARES=.*from 2 to 1024"):
            build_cpu_shares()


def test_a_platform_base_twice_or_for_a_platform_not_built_is_refused_before_the_engine() -> None:
    with pytest.raises(UsageError, match="given twice"):
        load_inputs(platform_bases=("linux/arm64=b:1", "aarch64=b:2"))
    stack = load_preset("cpu-deepspeed")  # image.platforms unset: one image
    inputs = load_inputs(platform_bases=("linux/arm64=b:1",))
    with pytest.raises(UsageError, match="the spec does not build linux/arm64"):
        resolve(stack, inputs)
    image = replace(stack.spec.image, platforms=("linux/amd64", "linux/arm64"))
    both = replace(stack, spec=replace(stack.spec, image=image))
    assert resolve(both, inputs).inputs.platform_bases == ((ARM, "b:1"),)

"""DeepSpeed's prebuilt ops in fingerprints and preflight: the collector's reading of what
DeepSpeed's install recorded (without importing DeepSpeed), the fingerprint's line and
fields, the architecture coverage rule, and why a rank cannot use the ops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import util
from pathlib import Path
from typing import Any

import pytest

from builder.fingerprint import deepspeed_ops
from builder.fingerprint.compare import PARTIAL, differences
from builder.fingerprint.record import Fingerprint
from builder.payload import collect, payload_path
from tests.conftest import unavailable

# the file DeepSpeed 0.19.8's setup.py writes, in its format (here fused_adam built for cuda)
INSTALLED = """\
version='0.19.8'
git_hash='unknown'
git_branch='unknown'
installed_ops={'deepspeed_not_implemented': False, 'async_io': False, 'deepspeed_ccl_comm': False, 'deepspeed_shm_comm': False, 'cpu_adagrad': False, 'cpu_adam': 1, 'cpu_lion': False, 'fused_adam': True, 'pin_memory': False}
accelerator_name='cuda'
torch_info={'version': '2.13', 'bf16_support': False, 'cuda_version': '13.0', 'nccl_version': '2.27', 'hip_version': '0.0'}
"""  # noqa: E501
H100 = "NVIDIA H100 80GB HBM3"


def fake_deepspeed(root: Path, installed: str | None = INSTALLED) -> Path:
    """A deepspeed package under root whose import fails: the collector must not import it."""
    package = root / "deepspeed"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the collector imported deepspeed')\n")
    if installed is not None:
        (package / "git_version_info_installed.py").write_text(installed)
    return root


def collected(root: Path, **env: str) -> dict[str, Any]:
    """collect.py run as an image runs it: its own python, the package on its path."""
    clean = {k: v for k, v in os.environ.items() if k not in collect.ARCH_VARIABLES.values()}
    out = subprocess.run(
        [sys.executable, str(payload_path("collect.py"))],
        env={**clean, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1", **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(json.loads(out))


def ops(
    names: list[str], accelerator: str | None = "cuda", arch: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {"ops": names, "accelerator": accelerator, "arch": list(arch)}


def bare(**data: Any) -> dict[str, Any]:
    """The fields a fingerprint's summary reads."""
    return {
        "os": {},
        "python": "3.11",
        "packages": {},
        "apt": {},
        "torch": None,
        "tools": {},
        "env": {},
        "deepspeed": None,
        **data,
    }


def test_the_collector_reads_the_installed_ops_without_importing_deepspeed(
    tmp_path: Path,
) -> None:
    found = collected(fake_deepspeed(tmp_path), TORCH_CUDA_ARCH_LIST="8.0; 9.0+PTX 8.0")
    assert found["deepspeed_ops"] == {
        "ops": ["cpu_adam", "fused_adam"],
        "accelerator": "cuda",
        "arch": ["8.0", "9.0+PTX"],
    }
    summary = Fingerprint("img", found).summary()
    assert ", prebuilt ops: cpu_adam, fused_adam (cuda; 8.0;9.0+PTX)\n" in summary


def test_the_builds_own_record_of_its_architectures_wins_over_a_runs_variable(
    tmp_path: Path,
) -> None:
    root = fake_deepspeed(tmp_path)
    (root / "deepspeed" / collect.ARCHS_FILE).write_text("8.0;9.0\n")
    found = collected(root, TORCH_CUDA_ARCH_LIST="10.0")  # launch.env would not change the .so
    assert found["deepspeed_ops"]["arch"] == ["8.0", "9.0"]


def test_an_old_deepspeed_without_the_file_has_no_prebuilt_ops(tmp_path: Path) -> None:
    found = collected(fake_deepspeed(tmp_path, None))
    assert found["deepspeed_ops"] == {"ops": [], "accelerator": None, "arch": []}
    assert deepspeed_ops.summary(found["deepspeed_ops"]) == "none (compiled just in time)"


def test_a_rocm_torch_reads_pytorch_rocm_arch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(fake_deepspeed(tmp_path)))
    monkeypatch.setenv("PYTORCH_ROCM_ARCH", "gfx90a;gfx942")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert collect.deepspeed_ops(hip=True)["arch"] == ["gfx90a", "gfx942"]  # type: ignore[index]
    assert collect.deepspeed_ops(hip=False)["arch"] == ["9.0"]  # type: ignore[index]


def test_without_deepspeed_the_field_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(util, "find_spec", lambda _name: None)  # what collect asks
    assert collect.deepspeed_ops(hip=False) is None
    assert deepspeed_ops.summary(None) == "-"
    assert "deepspeed  -\n" in Fingerprint("x", bare()).summary()


def test_the_real_installed_file_reads() -> None:
    spec = util.find_spec("deepspeed")
    if spec is None or not spec.submodule_search_locations:
        unavailable("DeepSpeed is not in the venv (make install puts it there)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    info = collect.installed_info(folder / "git_version_info_installed.py")
    assert isinstance(info["installed_ops"], dict)
    assert "cpu_adam" in info["installed_ops"]
    assert info["accelerator_name"] in ("cpu", "cuda", "hpu")


@pytest.mark.parametrize(
    ("value", "entries"),
    [
        ("", []),
        ("8.0;9.0", ["8.0", "9.0"]),
        (" 9.0 8.0+PTX ", ["9.0", "8.0+PTX"]),
        ("gfx90a; gfx942;;gfx90a", ["gfx90a", "gfx942"]),
    ],
)
def test_arch_lists_split_on_semicolons_or_blanks_in_order(value: str, entries: list[str]) -> None:
    assert collect.arch_list(value) == entries


def test_the_summary_line() -> None:
    both = ops(["cpu_adam", "fused_adam"], arch=("8.0", "9.0"))
    assert deepspeed_ops.summary(both) == "cpu_adam, fused_adam (cuda; 8.0;9.0)"
    assert deepspeed_ops.summary(ops(["cpu_adam"], "cpu")) == "cpu_adam (cpu)"
    data = bare(deepspeed="0.19.8", deepspeed_ops=ops([], "cpu"))
    # the names' column stays as wide as it was
    assert "deepspeed  0.19.8, prebuilt ops: none (compiled just in time)\n" in (
        Fingerprint("x", data).summary()
    )


def node(source: str, found: dict[str, Any] | None) -> Fingerprint:
    data: dict[str, Any] = {"packages": {"deepspeed": "0.19.8"}, "python": "3.11.2"}
    if found is not None:
        data["deepspeed_ops"] = found
    return Fingerprint(source, data)


def test_verify_names_other_ops_accelerator_and_architectures() -> None:
    good = ops(["cpu_adam", "fused_adam"], arch=("8.0", "9.0"))
    _, table = differences([node("node1", good), node("node2", good)])
    assert table == {}
    odd = ops(["cpu_adam"], "cpu", ("8.0",))
    _, table = differences([node("node1", good), node("node2", odd)])
    assert table == {
        "deepspeed ops": ["cpu_adam, fused_adam", "cpu_adam"],
        "deepspeed ops accelerator": ["cuda", "cpu"],
        "deepspeed ops arch": ["8.0;9.0", "8.0"],
    }
    # a record without them (a lock, no DeepSpeed) is not compared there
    lock = Fingerprint("stack.lock", {"packages": {"deepspeed": "0.19.8"}, PARTIAL: ["apt"]})
    _, table = differences([lock, node("image", good)])
    assert table == {}


def test_without_deepspeed_the_record_and_its_digest_are_as_before() -> None:
    """The key is absent, not null: an image without DeepSpeed keeps its digest."""
    assert "deepspeed_ops" not in node("a", None).data
    assert node("a", ops([])).digest != node("a", None).digest


@pytest.mark.parametrize(
    ("archs", "device", "covered"),
    [
        (["8.0"], "8.6", "native"),  # a cubin runs on later minors of its major
        (["8.0"], "8.0", "native"),
        (["8.6"], "8.0", "none"),
        (["8.0"], "9.0", "none"),
        (["9.0"], "8.0", "none"),
        (["9.0"], "10.0", "none"),
        (["8.0+PTX"], "9.0", "ptx"),  # the driver compiles the PTX forward
        (["8.0+PTX"], "8.6", "native"),  # +PTX carries the 8.0 cubin too
        (["9.0+PTX"], "8.0", "none"),
        (["8.0+PTX", "9.0"], "9.0", "native"),
        (["9.0a"], "9.0", "native"),
        (["9.0a"], "9.2", "none"),  # arch-specific code runs on exactly that arch
        (["Hopper"], "9.0", "none"),
        (["gfx942"], "gfx942", "native"),
        (["gfx90a"], "gfx942", "none"),
        (["gfx90a", "gfx942"], "gfx942:sramecc+:xnack-", "native"),
    ],
)
def test_coverage(archs: list[str], device: str, covered: str) -> None:
    assert deepspeed_ops.coverage(archs, device) == covered


def test_why_a_rank_cannot_use_the_ops() -> None:
    built = ops(["cpu_adam", "fused_adam"], arch=("8.0",))
    said = deepspeed_ops.unsuited(built, runs="cuda", arch="9.0", device=H100, word="GPU")
    assert said == (
        "fail",
        f"its GPUs are 9.0 ({H100}); the image's DeepSpeed ops (fused_adam) are built for 8.0 "
        "(image.archs): add 9.0 and rebuild",
    )
    assert deepspeed_ops.unsuited(built, runs="cuda", arch="8.6", device="A", word="GPU") is None
    host = ops(["cpu_adam", "utils"], arch=("8.0",))  # no GPU kernels: any GPU runs them
    assert deepspeed_ops.unsuited(host, runs="cuda", arch="9.0", device=H100, word="GPU") is None
    ptx = ops(["fused_adam"], arch=("8.0+PTX",))
    severity, what = deepspeed_ops.unsuited(  # type: ignore[misc]
        ptx, runs="cuda", arch="9.0", device=H100, word="GPU"
    )
    assert severity == "warn"
    assert what.endswith(
        "built for 8.0+PTX (image.archs), as PTX the driver compiles for 9.0 at the first use "
        "in every fresh container: add 9.0 and rebuild to skip that"
    )
    rocm = ops(["fused_adam"], arch=("gfx90a",))
    severity, what = deepspeed_ops.unsuited(  # type: ignore[misc]
        rocm, runs="cuda", arch="gfx942", device="AMD Instinct MI300X", word="GPU"
    )
    assert severity == "fail"
    assert what.startswith("its GPUs are gfx942 (AMD Instinct MI300X)")


def test_ops_built_for_another_accelerator_are_compiled_just_in_time() -> None:
    cpu_built = ops(["cpu_adam", "fused_adam"], "cpu")
    assert deepspeed_ops.unsuited(cpu_built, runs="cuda", arch="9.0", device=H100, word="GPU") == (
        "fail",
        "the image's DeepSpeed ops (cpu_adam, fused_adam) are built for cpu, its ranks run "
        "cuda: DeepSpeed will compile them just in time at every start; rebuild the image "
        "with its ops built for cuda",
    )
    # CPU ranks may be a rehearsal standing in for the GPUs: said, not failed
    said = deepspeed_ops.unsuited(ops(["cpu_adam"]), runs="cpu", arch=None, device="x", word=None)
    assert said is not None
    assert said[0] == "warn"


def test_nothing_prebuilt_or_no_arch_list_says_nothing() -> None:
    for built, arch in ((ops([]), "9.0"), (ops(["fused_adam"]), "9.0"), (ops(["a"], "cpu"), None)):
        runs = str(built["accelerator"])
        assert deepspeed_ops.unsuited(built, runs=runs, arch=arch, device="x", word="GPU") is None
    assert deepspeed_ops.unsuited(None, runs="cuda", arch="9.0", device="x", word="GPU") is None

"""Preflight's pure parts: judging the probe's reports (per node: visibility, stragglers,
links, transport, drift, wrong sums, missing ranks), its settings, the probe's
arguments as the probe's own parser reads them, and the probe's plan."""

from __future__ import annotations

import copy
import json
import re
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from builder import platforms
from builder.cluster.hostfile import hostfile_text, hosts_from_nodes
from builder.cluster.ssh import Ssh
from builder.collectives import gloo, nccl
from builder.errors import UsageError
from builder.launch.plan import launch_plan
from builder.payload.preflight import arguments
from builder.preflight.probe import (
    MIN_BUDGET,
    MOUNT,
    Settings,
    expected_of,
    preflight_stack,
    probe_args,
)
from builder.preflight.report import MARK, Expected, count_text, judge, rate
from builder.preflight.show import table
from builder.resolved import resolve
from builder.schedulers.ssh.preflight import ClusterPreflight, check_bundle
from builder.spec.loader import load_preset

NODES = ("node1", "node2", "node3", "node4")


def expected(**changes: Any) -> Expected:
    base = Expected(
        nodes=NODES,
        slots=2,
        device_word="GPU",
        library=nccl.COLLECTIVE,
        net="IB",
        fabric="infiniband",
        threshold=0.25,
    )
    return replace(base, **changes)


def point(total: float, size: int = 4096) -> dict[str, float]:
    return {"bytes": size, "seconds": 0.001, "algbw": 1.0, "busbw": 1.5, "min": total, "max": total}


def reports(want: Expected, **per_node: dict[str, Any]) -> list[dict[str, Any]]:
    """One healthy report per rank; per_node["node2"] changes node2's ranks."""
    world, slots = want.world, want.slots
    found = []
    for rank in range(world):
        node = want.nodes[rank // slots]
        first = rank // slots * slots
        leaders = range(0, world, slots)
        report: dict[str, Any] = {
            "rank": rank,
            "local_rank": rank - first,
            "world": world,
            "node": node,
            "error": None,
            "visible": slots,
            "device_names": ["NVIDIA H100 80GB HBM3"],
            "versions": {"torch": "2.15.0", "driver": "580.65", "runtime": "cuda 13.2"},
            "device_ok": True,
            "matmul": {"tflops": 700.0, "dtype": "bfloat16", "size": 8192},
            "memory": {"gbps": 3000.0, "bytes": 1 << 30},
            "allreduce": {
                "world": [point(world * (world + 1) / 2)],
                "intra": [point(sum(r + 1 for r in range(first, first + slots)))],
            },
            "transport": {"net": ["IB"], "local": ["P2P"], "using": ["IB"]},
        }
        if rank in leaders:
            report["allreduce"]["inter"] = [point(sum(r + 1 for r in leaders))]
            report["out_gbps"] = 45.0
            report["in_gbps"] = 45.0
            data = {"packages": {"torch": "2.15.0", "numpy": "2.1.0"}, "apt": {"libc6": "2.39"}}
            report["fingerprint"] = {"digest": "a" * 64, "data": data}
        for key, value in per_node.get(node, {}).items():
            if callable(value):
                value(report)
            else:
                report[key] = value
        found.append(report)
    return found


def output(found: list[dict[str, Any]]) -> str:
    # as pdsh shows them: prefixed, interleaved with the launcher's own lines
    return "".join(
        f"{r['node']}: [INFO] launch.py: spawned\n{r['node']}: {MARK}{json.dumps(r)}\n"
        for r in found
    )


def fails(found: list[dict[str, Any]], want: Expected) -> list[str]:
    result = judge(output(found), want)
    return [f.text() for f in result.findings if f.severity == "fail"]


def test_a_healthy_cluster_passes_and_is_tabled() -> None:
    want = expected()
    result = judge(output(reports(want)), want)
    assert result.ok, [f.text() for f in result.findings]
    assert [row.node for row in result.nodes] == list(NODES)
    assert all(row.ranks == 2 and row.tflops == 700.0 for row in result.nodes)
    assert result.sweep["world"][0]["busbw"] == 1.5
    text = table(result)
    assert "node4" in text
    assert "700 TFLOP/s bfloat16" in text
    assert "IB" in text
    assert json.loads(json.dumps(result.as_data()))["schema"] == 1


def test_the_table_writes_figures_out_as_people_read_them() -> None:
    """An H100 PCIe copies about 2039 GB/s: the table says 2040 GB/s, not 2.04e+03, and
    every figure in a column has the same unit."""
    want = expected(nodes=NODES[:2])

    def slow_sweep(report: dict[str, Any]) -> None:
        report["allreduce"]["world"][0]["busbw"] = 0.0000123

    found = reports(
        want,
        node1={
            "memory": {"gbps": 2039.4},
            "matmul": {"tflops": 1979.0, "dtype": "float8"},
            "x": slow_sweep,  # rank 0's sweep is the table's
        },
        node2={"memory": {"gbps": 2041.0}, "out_gbps": 45.23},
    )
    text = table(judge(output(found), want))
    assert not re.search(r"\de[+-]?\d", text)
    rows = {cells[0]: cells for cells in (re.split(r"\s{2,}", line) for line in text.splitlines())}
    # matmul, memory, link out/in
    assert rows["node1"][3:6] == ["1980 TFLOP/s float8", "2040 GB/s", "45/45 GB/s"]
    assert rows["node2"][3:6] == ["700 TFLOP/s bfloat16", "2040 GB/s", "45.2/45 GB/s"]
    assert rows["4 KiB"] == ["4 KiB", "0.0000123 GB/s", "1.5 GB/s", "1.5 GB/s"]


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (2039.4, "2040"),
        (700.0, "700"),
        (700, "700"),
        (45.0, "45"),
        (45.23, "45.2"),
        (999.6, "1000"),
        (0.0123, "0.0123"),
        (1.234e-5, "0.0000123"),
        (1234567.0, "1230000"),
        (0.0, "0"),
        (None, "-"),
        (float("nan"), "nan"),
    ],
)
def test_a_rate_has_three_significant_figures_written_out(value: float | None, shown: str) -> None:
    assert rate(value) == shown


def test_an_all_reduce_sum_is_written_out_whole() -> None:
    # 2048 ranks: the sum of rank + 1 over the world, which :g wrote as 2.09818e+06
    assert count_text(2048 * 2049 / 2) == "2098176"
    assert count_text(36) == "36"
    assert count_text(35.5) == "35.5"


def test_devices_not_all_visible_are_named() -> None:
    want = expected(slots=8)
    found = reports(want, node3={"visible": 7})
    assert "node3: 7 of 8 GPUs visible" in fails(found, want)


def test_a_device_that_does_not_initialise_is_named() -> None:
    want = expected()
    error = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
    found = reports(want, node2={"device_ok": False, "device_error": error, "error": error})
    assert any(
        f.startswith("node2: rank 2: its GPU did not initialise") for f in fails(found, want)
    )


def test_a_slow_matmul_is_named_against_the_median_of_the_others() -> None:
    want = expected()
    found = reports(want, node2={"matmul": {"tflops": 413.0, "dtype": "bfloat16"}})
    assert fails(found, want) == [
        "node2: matmul 41% below the median of the other nodes (413 vs 700 TFLOP/s)"
    ]
    # within the threshold: nothing
    found = reports(want, node2={"matmul": {"tflops": 600.0, "dtype": "bfloat16"}})
    assert fails(found, want) == []
    assert fails(found, replace(want, threshold=0.1)) != []


def test_rates_on_shared_cores_are_warnings() -> None:
    want = expected(rates_judged=False)
    found = reports(want, node2={"matmul": {"tflops": 100.0, "dtype": "bfloat16"}})
    result = judge(output(found), want)
    assert result.ok
    assert [f.severity for f in result.findings] == ["warn"]


def link(out: float, into: float) -> Any:
    def change(report: dict[str, Any]) -> None:
        if "out_gbps" in report:
            report["out_gbps"], report["in_gbps"] = out, into

    return change


def test_a_link_slow_both_ways_names_only_its_node() -> None:
    # node2's link is slow: it sends slowly to node3, and node1's sends to it arrive slowly,
    # so node1 (out) and node3 (in) look slow too
    want = expected()
    found = reports(
        want,
        node1={"x": link(5.0, 45.0)},
        node2={"x": link(5.0, 5.0)},
        node3={"x": link(45.0, 5.0)},
    )
    named = fails(found, want)
    assert len(named) == 1
    assert named[0].startswith("node2: link 89% below the median of the other nodes, slow both")


def test_a_slow_link_into_a_straggler_is_the_straggler_s() -> None:
    """A throttled node cannot take in what it is sent: its sender's link looks slow, and
    only the throttled node is named (seen on a CI machine under load)."""
    want = expected(nodes=NODES[:2])
    slow = {"tflops": 300.0, "dtype": "bfloat16"}
    found = reports(
        want, node2={"matmul": slow, "x": link(45.0, 30.0)}, node1={"x": link(30.0, 45.0)}
    )
    named = fails(found, want)
    assert [f.split(":")[0] for f in named] == ["node2"], named


def test_a_node_slow_to_send_is_named() -> None:
    want = expected(nodes=NODES[:2])
    found = reports(want, node2={"x": link(0.5, 45.0)}, node1={"x": link(45.0, 0.5)})
    named = fails(found, want)
    assert len(named) == 1, named
    assert named[0].startswith("node2: link 99% below"), named
    assert "slow sending to node1" in named[0]


def test_sockets_where_the_spec_says_infiniband_are_named() -> None:
    want = expected()
    found = reports(want, node4={"transport": {"net": ["Socket"], "local": [], "using": []}})
    assert fails(found, want) == [
        "node4: NCCL used sockets (NET/Socket), the spec says infiniband (NET/IB)"
    ]
    # fabric none: no NET is required
    assert fails(found, replace(want, net=None, fabric="none")) == []


def test_gloo_with_a_fabric_is_a_warning() -> None:
    want = expected(library=gloo.COLLECTIVE, net=None, device_word=None)
    result = judge(output(reports(want)), want)
    assert result.ok
    assert any("gloo runs over TCP" in f.what for f in result.findings)


def test_a_drifted_node_is_named_with_what_differs() -> None:
    want = expected()

    def drift(report: dict[str, Any]) -> None:
        if "fingerprint" in report:
            report["fingerprint"] = copy.deepcopy(report["fingerprint"])
            report["fingerprint"]["digest"] = "b" * 64
            report["fingerprint"]["data"]["packages"]["numpy"] = "2.0.2"

    found = reports(want, node2={"x": drift})
    assert fails(found, want) == [
        "node2: environment differs: python package numpy 2.0.2 (on node1: 2.1.0)"
    ]


def test_other_devices_or_drivers_are_named() -> None:
    want = expected()
    versions = {"torch": "2.15.0", "driver": "570.10", "runtime": "cuda 13.2"}
    found = reports(want, node3={"versions": versions, "device_names": ["NVIDIA A100"]})
    (named,) = fails(found, want)
    assert named.startswith("node3: devices or versions differ: devices 'NVIDIA A100'")
    assert "driver 570.10 (on node1: 580.65)" in named


def test_a_wrong_sum_a_failed_rank_and_a_silent_rank_are_named() -> None:
    want = expected()
    found = reports(want)
    found[5]["allreduce"]["world"][0]["min"] = 35.0
    found[3]["error"] = "DistStoreError: timed out"
    del found[6]
    named = fails(found, want)
    assert "node3: rank 5: all-reduce of 4 KiB over the world gave 35..36, expected 36" in named
    assert "node2: rank 3: DistStoreError: timed out" in named
    assert "node4: rank(s) 6 never reported" in named


def test_settings_are_checked() -> None:
    assert Settings().seconds == 60.0
    assert Settings(quick=True).seconds == 6.0
    for bad in (MIN_BUDGET - 0.1, float("nan"), float("inf"), -1.0):
        with pytest.raises(UsageError, match="--budget"):
            Settings(budget=bad)
    for bad in (0.0, 1.0, float("nan")):
        with pytest.raises(UsageError, match="--threshold"):
            Settings(threshold=bad)


PRESETS = ["cuda-deepspeed", "rocm-deepspeed", "gaudi-deepspeed", "cpu-deepspeed"]


@pytest.mark.parametrize("preset", PRESETS)
def test_the_probe_reads_the_arguments_preflight_writes(preset: str) -> None:
    spec = load_preset(preset).spec
    args = probe_args(
        platforms.get(spec.image.accelerator), spec.launch.slots, Settings(quick=True), 1
    )
    parsed = arguments().parse_args([*args, "--local_rank=3"])
    assert parsed.slots == spec.launch.slots
    assert parsed.quick
    assert parsed.threads == 1
    assert parsed.budget == 6.0
    assert parsed.timeout == 66.0
    devices = {"cuda": "cuda", "rocm": "cuda", "gaudi": "hpu", "cpu": "cpu"}
    backends = {"cuda": "nccl", "rocm": "nccl", "gaudi": "hccl", "cpu": "gloo"}
    assert parsed.device == devices[spec.image.accelerator]
    assert parsed.backend == backends[spec.image.accelerator]


def test_what_the_probe_expects_follows_platform_and_fabric() -> None:
    spec = load_preset("cuda-deepspeed").spec
    fabric = replace(spec, image=replace(spec.image, fabric="infiniband"))

    found = expected_of(
        platforms.get("cuda"),
        ("a", "b"),
        8,
        fabric="infiniband",
        env=resolve(fabric).run_environment(),
        settings=Settings(),
    )
    assert (found.library.title, found.net, found.device_word) == ("NCCL", "IB", "GPU")
    assert (
        expected_of(
            platforms.get("rocm"),
            ("a",),
            8,
            fabric="roce",
            env={"NCCL_NET": "IB"},
            settings=Settings(),
        ).library.title
        == "RCCL"
    )
    gaudi = expected_of(
        platforms.get("gaudi"), ("a",), 8, fabric="none", env={}, settings=Settings()
    )
    assert (gaudi.library.title, gaudi.net, gaudi.device_word) == ("HCCL", None, "HPU")


def test_the_probes_plan_is_the_runs_plan_but_for_script_and_name(tmp_path: Path) -> None:
    spec = load_preset("cuda-deepspeed").spec
    folder = str(tmp_path / "cluster")
    probe = preflight_stack(resolve(spec), folder, Settings(quick=True))
    run = launch_plan(resolve(spec), image="img:1", cluster_dir=folder)
    plan = launch_plan(probe, image="img:1", cluster_dir=folder)
    assert (plan.runtime, plan.launcher, plan.nodes) == (run.runtime, run.launcher, run.nodes)
    (launcher,) = plan.of_role("launch")
    argv = launcher.argv
    assert f"{MOUNT}/preflight.py" in argv
    assert "--quick" in argv
    assert f"builder-{spec.name}-preflight" in argv
    start = plan.of_role("start")[0].argv
    assert f"{folder}/preflight:{MOUNT}:ro" in start

    def volumes(argv: tuple[str, ...]) -> list[str]:
        return [argv[i + 1] for i, a in enumerate(argv) if a == "--volume"]

    assert volumes(start) == [
        *volumes(run.of_role("start")[0].argv),
        f"{folder}/preflight:{MOUNT}:ro",
    ]
    bare = replace(spec, launch=replace(spec.launch, runtime="none"))
    (step,) = launch_plan(
        preflight_stack(resolve(bare), folder, Settings()), image="i", cluster_dir=folder
    ).of_role("launch")
    assert f"{folder}/preflight/preflight.py" in step.argv


def test_the_probes_launch_script_is_valid_sh(tmp_path: Path) -> None:
    spec = load_preset("cpu-deepspeed").spec
    run = ClusterPreflight(
        resolve(spec), image="i:1", cluster_dir=tmp_path / "c d", settings=Settings(), ssh=Ssh()
    )
    script = run.plan.text()
    assert "preflight" in script
    from builder.schedulers.ssh.bundle import launch_script, needed_files

    text = launch_script(run.plan, str(run.folder), needed_files(spec))
    subprocess.run(["sh", "-n"], input=text, text=True, check=True)


def test_a_bundle_for_other_nodes_is_refused(tmp_path: Path) -> None:
    spec = load_preset("cpu-deepspeed").spec
    (tmp_path / "hostfile").write_text(hostfile_text(hosts_from_nodes(["x1", "x2"], 2)))
    with pytest.raises(UsageError, match="does not match the spec"):
        check_bundle(spec, tmp_path)
    wanted = hosts_from_nodes(spec.launch.nodes, spec.launch.slots)
    (tmp_path / "hostfile").write_text(hostfile_text(wanted))
    check_bundle(spec, tmp_path)


def test_ssh_runs_one_quoted_command() -> None:
    argv = Ssh(Path("/c/ssh config")).argv("node1", ["sh", "/a b/launch.sh", "node1"])
    assert argv[:3] == ["ssh", "-F", "/c/ssh config"]
    assert "BatchMode=yes" in argv
    assert argv[-2] == "node1"
    assert shlex.split(argv[-1]) == ["sh", "/a b/launch.sh", "node1"]


def test_dry_run_prints_the_probes_plan_and_writes_nothing(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from builder.cli.app import app

    cluster = tmp_path / "cluster"
    argv = ["preflight", "--preset", "cuda-deepspeed", "--cluster-dir", str(cluster), "--dry-run"]
    result = CliRunner().invoke(app, [*argv, "--quick"])
    assert result.exit_code == 0, result.output
    assert "builder-cuda-deepspeed-preflight" in result.stdout
    assert f"{cluster}/preflight:{MOUNT}:ro" in result.stdout
    assert "--backend nccl" in result.stdout
    assert not cluster.exists()


def prebuilt(arch: list[str], accelerator: str = "cuda") -> dict[str, Any]:
    """What each rank of an image with fused_adam prebuilt reports, on an H100."""
    ops = {"ops": ["cpu_adam", "fused_adam"], "accelerator": accelerator, "arch": arch}
    return {"device_arch": "9.0", "accelerator": "cuda", "deepspeed_ops": ops}


def test_a_node_whose_gpus_the_prebuilt_ops_do_not_cover_is_named() -> None:
    want = expected()
    each = {node: prebuilt(["8.0", "9.0"]) for node in NODES}
    result = judge(output(reports(want, **each)), want)
    assert result.ok, [f.text() for f in result.findings]
    assert [row.arch for row in result.nodes] == ["9.0"] * 4
    each["node2"] = prebuilt(["8.0"])
    assert fails(reports(want, **each), want) == [
        "node2: its GPUs are 9.0 (NVIDIA H100 80GB HBM3); the image's DeepSpeed ops "
        "(fused_adam) are built for 8.0 (image.archs): add 9.0 and rebuild"
    ]  # once for the node, though both its ranks say so
    each["node2"] = prebuilt(["8.0+PTX"])
    result = judge(output(reports(want, **each)), want)
    assert result.ok
    assert [f.node for f in result.findings if "as PTX the driver compiles" in f.what] == ["node2"]


def test_ops_built_for_the_cpu_in_a_gpu_image_fail_every_node() -> None:
    want = expected()
    found = reports(want, **{node: prebuilt([], accelerator="cpu") for node in NODES})
    named = fails(found, want)
    assert len(named) == 4
    assert named[0] == (
        "node1: the image's DeepSpeed ops (cpu_adam, fused_adam) are built for cpu, its "
        "ranks run cuda: DeepSpeed will compile them just in time at every start; rebuild "
        "the image with its ops built for cuda"
    )


def test_no_arch_list_or_nothing_prebuilt_is_not_judged() -> None:
    want = expected()
    none = prebuilt([])
    none["deepspeed_ops"]["ops"] = []
    for each in (prebuilt([]), none, {"device_arch": "9.0", "deepspeed_ops": None}):
        result = judge(output(reports(want, node3=each)), want)
        assert result.ok, [f.text() for f in result.findings]


@pytest.mark.parametrize("where", ["job", "cleanup"])
def test_ctrl_c_anywhere_in_the_run_stops_it_and_judges_nothing(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during the job or during the cleanup after it: the run ends Interrupted
    (exit 130), every ssh is ended, launch.sh's stop runs, and no partial job is judged."""
    from builder.errors import Interrupted

    run = ClusterPreflight(
        resolve(load_preset("cpu-deepspeed").spec),
        image="i:1",
        cluster_dir=tmp_path / "c",
        settings=Settings(),
        ssh=Ssh(),
    )
    calls: list[str] = []
    for step in ("reach", "write", "check_folder"):
        monkeypatch.setattr(run, step, lambda: None)

    def job() -> tuple[str, list[Any]]:
        if where == "job":
            raise KeyboardInterrupt
        return "a partial job's output", []

    def cleanup(*, stop: bool = False, **_: bool) -> None:
        calls.append(f"cleanup stop={stop}")
        if where == "cleanup" and len(calls) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(run, "_job", job)
    monkeypatch.setattr(run, "cleanup", cleanup)
    monkeypatch.setattr(run.nodes, "end", lambda: calls.append("end"))
    monkeypatch.setattr(
        "builder.schedulers.ssh.preflight.judge", lambda *_: pytest.fail("a partial job was judged")
    )
    with pytest.raises(Interrupted) as caught:
        run.run()
    assert caught.value.exit_code == 130
    assert calls[-2:] == ["end", "cleanup stop=True"]


def test_a_node_of_an_architecture_the_image_lacks_is_named_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from builder.errors import WrongArchitecture

    spec = load_preset("cpu-deepspeed").spec
    spec = replace(spec, image=replace(spec.image, platforms=("linux/amd64",)))
    run = ClusterPreflight(
        resolve(spec), image="i:1", cluster_dir=tmp_path / "c", settings=Settings(), ssh=Ssh()
    )
    asked: list[Any] = []

    def answers(commands: dict[str, Any], timeout: float, **_: Any) -> dict[str, Any]:
        del timeout
        asked.append(commands)
        machines = {"node1": "x86_64", "node2": "aarch64"}
        return {node: (0, machines.get(node, "x86_64") + "\n") for node in commands}

    monkeypatch.setattr(run, "reach", lambda: None)
    monkeypatch.setattr(run.nodes, "run", answers)
    monkeypatch.setattr(run, "write", lambda: pytest.fail("written before the check"))
    with pytest.raises(WrongArchitecture) as wrong:
        run.run()
    assert wrong.value.exit_code == 21
    assert wrong.value.nodes == ("node2",)
    assert str(wrong.value).startswith("node2 is aarch64; the image i:1 is built for linux/amd64")
    assert all(tuple(c) == ("uname", "-m") for c in asked[0].values())
    # every node of a built architecture: the check passes on to the writing
    spec = replace(spec, image=replace(spec.image, platforms=("linux/amd64", "linux/arm64")))
    run = ClusterPreflight(
        resolve(spec), image="i:1", cluster_dir=tmp_path / "c", settings=Settings(), ssh=Ssh()
    )
    monkeypatch.setattr(run.nodes, "run", answers)
    run.check_architectures()

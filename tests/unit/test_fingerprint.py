"""Comparing fingerprints: which fields differ, what a lock or a reference image covers,
and the collector itself, run by this machine's python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from builder.fingerprint.compare import PARTIAL, difference_table, differences
from builder.fingerprint.record import Fingerprint, parse_collected
from builder.fingerprint.sources import collector_request, of_image
from builder.payload import payload_text
from tests.fakes import FakeEngine, FakeImage


def record(source: str, **changes: Any) -> Fingerprint:
    data: dict[str, Any] = {
        "os": {"id": "debian", "version_id": "12"},
        "python": "3.11.2",
        "packages": {"torch": "2.13.0", "einops": "0.8.2"},
        "apt": {"pdsh": "2.34", "bash": "5.2"},
        "env": {"NCCL_DEBUG": "WARN"},
        "tools": {"pdsh": "pdsh-2.34"},
        "spec_hash": "abc",
    }
    for key, value in changes.items():
        data[key] = value
    return Fingerprint(source, data)


def test_same_records_have_no_differences_and_one_digest() -> None:
    sources, table = differences([record("a"), record("b")])
    assert sources == ["a", "b"]
    assert table == {}
    assert record("a").digest == record("b").digest


def test_a_changed_package_and_a_missing_one_are_named() -> None:
    b = record("b", packages={"torch": "2.13.0", "einops": "0.8.1", "extra": "1"})
    _, table = differences([record("a"), b])
    assert table == {
        "python package einops": ["0.8.2", "0.8.1"],
        "python package extra": ["missing", "1"],
    }
    assert record("a").digest != b.digest
    shown = difference_table(["a", "b"], table)
    assert shown.splitlines()[1].split() == ["python", "package", "einops", "0.8.2", "0.8.1"]


def test_a_lock_covers_python_fully_and_apt_only_where_it_pins() -> None:
    lock = Fingerprint(
        "stack.lock",
        {
            "packages": {"torch": "2.13.0", "einops": "0.8.2"},
            "apt": {"pdsh": "2.34"},
            "spec_hash": "abc",
            PARTIAL: ["apt"],
        },
    )
    _, table = differences([lock, record("image")])
    assert table == {}  # no OS, env or base packages in a lock: not compared
    _, table = differences([lock, record("image", apt={"pdsh": "2.35", "bash": "5.2"})])
    assert table == {"apt package pdsh": ["2.34", "2.35"]}


def test_a_reference_image_is_not_compared_on_run_time_env() -> None:
    nodes = [record("n1", env={"NCCL_DEBUG": "INFO"}), record("n2", env={"NCCL_DEBUG": "INFO"})]
    sources, table = differences(nodes, reference=record("img"))
    assert sources == ["image img", "n1", "n2"]
    assert table == {}
    nodes[1] = record("n2", env={"NCCL_DEBUG": "WARN"})
    _, table = differences(nodes, reference=record("img"))
    assert table == {"env NCCL_DEBUG": ["-", "INFO", "WARN"]}


def test_the_collector_runs_on_this_python_and_parses() -> None:
    out = subprocess.run(
        [sys.executable, "-"],
        input=payload_text("collect.py"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = parse_collected("here", out, "hash")
    assert found.data["python"] == ".".join(map(str, sys.version_info[:3]))
    assert found.data["packages"]["typer"]
    assert found.data["spec_hash"] == "hash"
    assert json.loads(out)["os"]


def test_the_collector_records_what_each_collective_library_and_platform_asks_for() -> None:
    env = {**os.environ, "HSA_FORCE_FINE_GRAIN_PCIE": "1", "RCCL_MSCCL_ENABLE": "0"}
    env |= {"NCCL_DEBUG": "INFO", "UNRELATED_SETTING": "x"}
    out = subprocess.run(
        [sys.executable, "-", collector_request()],
        input=payload_text("collect.py"),
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    data = json.loads(out)
    assert {"HSA_FORCE_FINE_GRAIN_PCIE", "RCCL_MSCCL_ENABLE", "NCCL_DEBUG"} <= set(data["env"])
    assert "UNRELATED_SETTING" not in data["env"]
    # kept even where absent (digests of unchanged nodes stay the same); RCCL only when found
    assert "nccl" in data
    assert "hccl" in data
    assert "rccl" not in data or data["rccl"]


def test_a_rocm_nodes_rccl_and_hsa_variables_are_recorded_and_compared() -> None:
    def node(rccl: str) -> FakeImage:
        return FakeImage(
            f"sha256:{rccl}",
            (f"rocm:{rccl}",),
            apt={"rccl": rccl},
            env=("PATH=/usr/bin", "HSA_FORCE_FINE_GRAIN_PCIE=1"),
        )

    engine = FakeEngine(node("2.22.3.60204-116~22.04"), node("2.21.5.60204-116~22.04"))
    first = of_image(engine, "rocm:2.22.3.60204-116~22.04")
    second = of_image(engine, "rocm:2.21.5.60204-116~22.04")
    assert first.data["rccl"] == "2.22.3.60204-116~22.04"
    assert first.data["env"]["HSA_FORCE_FINE_GRAIN_PCIE"] == "1"
    assert "rccl       2.22.3.60204-116~22.04\n" in first.summary()
    _, table = differences([first, second])
    assert table["rccl"] == ["2.22.3.60204-116~22.04", "2.21.5.60204-116~22.04"]

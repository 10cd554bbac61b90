"""The rehearsal's pure parts: how the emitted commands are adapted, and how the
probe's reports are read (the real runs are in tests/integration)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from builder.contract import ACCELERATOR_LABEL, DEEPSPEED_OPS_LABEL, REHEARSAL_LABEL
from builder.errors import UsageError
from builder.launch import launchers
from builder.launch.actions import ContainerStart
from builder.launch.launchers.torchrun import ROOT_CAUSE, rank_lines
from builder.launch.logs import Raised, error_of, raised_in
from builder.launch.plan import launch_plan
from builder.preflight.report import probe_reports
from builder.rehearse.faults import Kill, kill_of
from builder.rehearse.report import MARK, Expected, check_reports, rank_table
from builder.rehearse.session import Node
from builder.rehearse.staging import on_node, probed_ops
from builder.resolved import resolve
from builder.spec.loader import load_preset

if TYPE_CHECKING:
    from pathlib import Path

NODE = Node("node2", "rehearse-1-node2")


class _Session:
    """What on_node reads of a session."""

    network = "rehearse-1"
    label = (REHEARSAL_LABEL, "rehearse-1")


def test_only_what_a_laptop_lacks_is_changed() -> None:
    spec = load_preset("cuda-deepspeed").spec
    spec = replace(spec, image=replace(spec.image, fabric="infiniband"))
    plan = launch_plan(resolve(spec), image="team/t:1", cluster_dir="/c")
    emitted = plan.steps[1].action
    adapted = on_node(emitted, NODE, _Session(), resolve(spec))  # type: ignore[arg-type]
    assert isinstance(emitted, ContainerStart)
    assert isinstance(adapted, ContainerStart)
    argv = adapted.argv()
    assert argv[:4] == ["docker", "run", "--label", f"{REHEARSAL_LABEL}=rehearse-1"]
    assert "--gpus" not in argv
    assert "/dev/infiniband" not in argv
    assert argv[argv.index("--network") + 1] == "rehearse-1"
    assert argv[argv.index("--hostname") + 1] == "node2"
    assert argv[argv.index("--name") + 1] == "rehearse-1-node2"
    assert adapted.flags == ("--ipc", "host")  # the cpu platform's, standing in
    # everything else is the emitted command
    same = ("image", "binds", "env", "command", "detach", "remove")
    assert all(getattr(adapted, name) == getattr(emitted, name) for name in same)
    assert argv[-1] == "team/t:1"
    launcher = on_node(plan.steps[-1].action, NODE, _Session(), resolve(spec))  # type: ignore[arg-type]
    assert "rehearse-1-node2" in launcher.argv()
    assert f"builder-{spec.name}" not in launcher.argv()


def report(rank: int, node: str, **changes: Any) -> dict[str, Any]:
    base = {
        "rank": rank,
        "local_rank": rank % 2,
        "world": 4,
        "node": node,
        "master": "node1",
        "env": {"V": "a $b"},
        "packages": {"torch": "2.13.0"},
        "sum": 10.0,
        "error": None,
    }
    return {**base, **changes}


EXPECTED = Expected(nodes=("node1", "node2"), slots=2, master="node1", env={"V": "a $b"})


def test_reports_are_found_behind_prefixes_and_glued_lines() -> None:
    one, two = (MARK + json.dumps(report(r, "node1")) for r in (0, 1))
    output = f"node1: noise\nnode1: {one}{two}\nnot json: {MARK}{{broken\n"
    assert [r["rank"] for r in probe_reports(output, MARK)] == [0, 1]


def test_a_good_world_passes() -> None:
    rows, faults = check_reports(
        [report(0, "node1"), report(1, "node1"), report(2, "node2"), report(3, "node2")],
        EXPECTED,
    )
    assert faults == []
    assert "FAIL" not in rank_table(rows)


def test_each_fault_names_its_node() -> None:
    reports = [
        report(0, "node1"),
        report(1, "node1", env={"V": "a "}),
        report(2, "node2", packages={"torch": "2.12.0"}),
    ]
    rows, faults = check_reports(reports, EXPECTED)
    found = {(f.node, f.what) for f in faults}
    assert ("node1", "rank 1: V='a ', expected 'a $b'") in found
    assert ("node2", "rank(s) 3 never reported") in found
    assert ("node2", "environment differs: torch 2.12.0 (on node1: 2.13.0)") in found
    assert ("node2", "local ranks [0], expected 0..1 once each") in found
    assert "FAIL: V='a '" in rank_table(rows)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"world": 2}, "world size 2, expected 4"),
        ({"master": "node2"}, "MASTER_ADDR 'node2', expected 'node1'"),
        ({"sum": 3.0}, "all-reduce sum 3.0, expected 10.0"),
        ({"error": "RuntimeError: gloo"}, "RuntimeError: gloo"),
    ],
)
def test_rank_checks(change: dict[str, Any], message: str) -> None:
    reports = [report(r, "node1" if r < 2 else "node2") for r in range(4)]
    reports[3] = {**reports[3], **change}
    _, faults = check_reports(reports, EXPECTED)
    assert [(f.node, f.what) for f in faults] == [("node2", f"rank 3: {message}")]


TORCHRUN_FAILURE = """\
rank 2 gives up
Traceback (most recent call last):
  File "/opt/venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
Root Cause (first observed failure):
[0]:
  time      : 2026-11-21_23:25:41
  host      : node2
  rank      : 2 (local_rank: 0)
  exitcode  : 3 (pid: 20)
============================================================
"""


def test_torchrun_root_cause_and_the_ranks_lines() -> None:
    found = ROOT_CAUSE.search(TORCHRUN_FAILURE)
    assert found is not None
    assert found.groups() == ("node2", "2", "0", "3")
    shown = rank_lines(TORCHRUN_FAILURE)
    assert "rank 2 gives up" in shown
    assert "sys.exit(main())" not in shown
    assert "host      : node2" in shown


def test_a_node_that_compiled_an_op_the_image_carries_is_named() -> None:
    expected = replace(EXPECTED, ops=("cpu_adam",))
    jit = "compiled just in time (the image was to carry it)"
    reports = [
        report(0, "node1", ops={"cpu_adam": "prebuilt"}),
        report(1, "node1"),  # the node's other ranks do not try the ops
        report(2, "node2", ops={"cpu_adam": jit}),
        report(3, "node2"),
    ]
    _, faults = check_reports(reports, expected)
    assert [(f.node, f.what) for f in faults] == [("node2", f"rank 2: DeepSpeed's cpu_adam: {jit}")]
    _, faults = check_reports([report(r, f"node{r // 2 + 1}") for r in range(4)], expected)
    assert {f.what for f in faults} == {
        "rank 0: DeepSpeed's cpu_adam: not tried",
        "rank 2: DeepSpeed's cpu_adam: not tried",
    }


def test_the_ops_a_rehearsal_asks_for_come_from_the_images_labels() -> None:
    cpu = {ACCELERATOR_LABEL: "cpu", DEEPSPEED_OPS_LABEL: "cpu_adam,deepspeed_shm_comm"}
    assert probed_ops(cpu) == ("cpu_adam",)
    assert probed_ops({**cpu, ACCELERATOR_LABEL: "cuda"}) == ()  # built for its GPUs
    assert probed_ops({ACCELERATOR_LABEL: "cpu"}) == ()  # built before, or with []
    assert probed_ops({}) == ()


def test_keep_says_how_to_remove_the_bundle_too() -> None:
    """--keep leaves the bundle, which holds the cluster's private key: its clean-up hint
    names it (and a real sh removes it with the hint's own command)."""
    import shlex
    import subprocess

    from builder.rehearse.session import Session

    said: list[str] = []
    session = Session(None, nodes=2, launcher="torchrun", timeout=1.0, say=said.append)  # type: ignore[arg-type]
    session.teardown(keep=True)
    (hint,) = said
    assert "private key" in hint
    remove = hint.rsplit("`", 2)[-2]
    assert remove == f"rm -rf {shlex.quote(str(session.folder))}"
    subprocess.run(["sh", "-c", remove], check=True)
    assert not session.folder.exists()


@pytest.mark.parametrize(
    ("options", "kill"),
    [
        ({"kill": "node2", "at": 5.0}, Kill("node2", at=5.0)),
        ({"kill": "node2:1", "after": "saved"}, Kill("node2", 1, after="saved")),
        ({"kill": "node3", "at": 0.0, "back": 4.0}, Kill("node3", at=0.0, back=4.0)),
        ({}, None),
    ],
)
def test_kill_options_become_one_fault(options: dict[str, Any], kill: Kill | None) -> None:
    given = {"kill": None, "at": None, "after": None, "back": None, **options}
    assert kill_of(given.pop("kill"), nodes=3, **given) == kill


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"kill": "node4", "at": 1.0}, "node1 to node3"),
        ({"kill": "node0", "at": 1.0}, "node1 to node3"),
        ({"kill": "node2:x", "at": 1.0}, "node2:1"),
        ({"kill": "node2"}, "--kill-at SECONDS"),
        ({"kill": "node2", "at": 1.0, "after": "x"}, "not both"),
        ({"kill": "node2", "after": "  "}, "the text of a line"),
        ({"kill": "node2:0", "at": 1.0, "back": 2.0}, "whole node back"),
        ({"at": 1.0}, "give --kill NODE[:LOCAL_RANK] too"),
        ({"back": 1.0}, "give --kill NODE[:LOCAL_RANK] too"),
    ],
)
def test_kill_options_that_cannot_work_are_refused(options: dict[str, Any], says: str) -> None:
    given = {"kill": None, "at": None, "after": None, "back": None, **options}
    with pytest.raises(UsageError, match=re.escape(says)):
        kill_of(given.pop("kill"), nodes=3, **given)


def test_the_raising_line_is_read_from_a_traceback_with_its_prefixes() -> None:
    """The last traceback: the script's own last frame and the exception, whatever
    prefixes torch and torchrun put before the lines."""
    text = (
        "[rank3]:[rank3]: Traceback (most recent call last):\n"
        '[rank3]:[rank3]:   File "/workspace/train.py", line 45, in <module>\n'
        "[rank3]:[rank3]:     main()\n"
        '[rank3]:[rank3]:   File "/workspace/train.py", line 31, in main\n'
        "[rank3]:[rank3]:     step(model)\n"
        '[rank3]:[rank3]:   File "/opt/torch/torch/nn/module.py", line 9, in step\n'
        "[rank3]:[rank3]:     ^^^^^^\n"
        "[rank3]:[rank3]: ValueError: bad batch\n"
    )
    raised = raised_in(text, "train.py")
    assert raised == Raised("/workspace/train.py", 31, "main", "ValueError: bad batch")
    assert raised_in(text) == Raised(
        "/opt/torch/torch/nn/module.py", 9, "step", "ValueError: bad batch"
    )
    assert raised_in("no traceback here\n") is None


def test_torchruns_rank_logs_are_read_by_node_attempt_and_rank(tmp_path: Path) -> None:
    """torchrun --log-dir LOGS/ranks-NODE: RUN/attempt_N/LOCAL_RANK/ per rank; the error
    comes from error.json (the script's @record) before stderr."""
    for node, attempt, rank in (("node1", 0, 0), ("node2", 1, 1), ("node2", 0, 1)):
        folder = tmp_path / f"ranks-{node}" / "run_x" / f"attempt_{attempt}" / str(rank)
        folder.mkdir(parents=True)
        (folder / "stdout.log").write_text(f"start\nresuming from epoch {attempt}\n")
    (tmp_path / "ranks-node2" / "run_x" / "odd").mkdir()
    logs = launchers.get("torchrun").rank_logs(tmp_path)
    assert [(log.node, log.attempt, log.local_rank) for log in logs] == [
        ("node1", 0, 0),
        ("node2", 0, 1),
        ("node2", 1, 1),
    ]
    last = logs[-1]
    assert last.first_line() == "start"
    assert last.first_line(re.compile("resum")) == "resuming from epoch 1"
    stack = 'Traceback (most recent call last):\n  File "/w/t.py", line 7, in f\nKeyError: 1\n'
    (last.folder / "stderr.log").write_text(stack.replace("KeyError: 1", "OSError: x"))
    (last.folder / "error.json").write_text(
        json.dumps({"message": {"message": "KeyError: 1", "extraInfo": {"py_callstack": stack}}})
    )
    error = error_of(last, "t.py")
    assert error is not None
    assert error.raised == Raised("/w/t.py", 7, "f", "KeyError: 1")
    (last.folder / "error.json").unlink()
    assert error_of(last, "t.py").raised.error == "OSError: x"  # type: ignore[union-attr]

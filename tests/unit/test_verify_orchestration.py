"""`builder verify` and `builder diff` through the CLI on the fake engine: the collector
runs in each container (docker exec) or a throwaway one of an image, and the exit
code and message say which one differs (tests/integration does it for real)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from typer.testing import CliRunner

import builder.cli.environment
import tests.fakes
from builder.cli import app
from builder.contract import SPEC_HASH_LABEL
from builder.errors import EXIT_CODES
from builder.lock.file import Base, Lock
from tests.fakes import COLLECTOR, FakeEngine, FakeImage

if TYPE_CHECKING:
    from pathlib import Path

IMAGE = "team/train:1"
PACKAGES = {"deepspeed": "0.19.8", "numpy": "2.3.1", "torch": "2.13.0"}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    """An engine with IMAGE and two containers of it, a and b, that the CLI connects to."""
    engine = FakeEngine(
        FakeImage("sha256:1", (IMAGE,), {SPEC_HASH_LABEL: "0a1b2c"}, dict(PACKAGES), {"libc6": "2"})
    )
    for name in ("a", "b"):
        engine.start(IMAGE, name=name, environment={"NCCL_DEBUG": "WARN"})
    monkeypatch.setattr(builder.cli.environment, "connect", lambda: engine)
    return engine


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_containers_of_one_image_are_the_same(fake: FakeEngine) -> None:
    code, out, _ = run("verify", "--containers", "a,b", "--image", IMAGE)
    assert code == 0
    assert out.endswith("ok: the 2 nodes are the same\n")
    lines = [line.split() for line in out.splitlines()[:-1]]
    assert [line[1] for line in lines] == [IMAGE, "a", "b"]
    assert lines[1][0] == lines[2][0]  # one digest
    collected = [
        call[1] for call in fake.called("exec") if call[2:5] == ("python3", "-c", COLLECTOR)
    ]
    assert sorted(collected) == ["a", "b"]


def test_a_container_with_another_package_version_is_named(fake: FakeEngine) -> None:
    fake.container("b").packages["torch"] = "2.12.0"
    code, out, err = run("verify", "--containers", "a,b")
    assert code == EXIT_CODES["DriftFound"] == 13
    # the torch build the collector reads changes with the package
    assert "the nodes differ in 2 field(s)" in err
    assert "- b: python package torch 2.12.0 (a: 2.13.0); torch version 2.12.0 (a: 2.13.0)" in err
    assert "python package torch" in out


def test_a_missing_container_is_not_in_the_engine(fake: FakeEngine) -> None:
    code, _, err = run("verify", "--containers", "a,c")
    assert code == EXIT_CODES["NotInEngine"] == 14
    assert "'c'" in err


def test_diff_of_a_container_and_its_image(fake: FakeEngine) -> None:
    assert run("diff", "container:a", "container:b")[0] == 0
    fake.container("a").packages["numpy"] = "2.3.2"
    code, _, err = run("diff", "container:a", IMAGE)
    assert code == 13
    assert f"- {IMAGE}: " in err
    assert "python package numpy 2.3.1 (a: 2.3.2)" in err
    assert run("diff", "container:a", "team/train:2")[0] == 14


def test_diff_against_a_lock_compares_what_it_pins(fake: FakeEngine, tmp_path: Path) -> None:
    lock = Lock("train", "0a1b2c", IMAGE, Base("debian:12", "sha256:0"), dict(PACKAGES), {})
    path = tmp_path / "stack.lock"
    path.write_text(lock.text())
    assert run("diff", str(path), "container:a")[0] == 0
    fake.container("a").packages.pop("numpy")
    code, _, err = run("diff", str(path), "container:a")
    assert code == 13
    assert "python package numpy missing" in err


def test_one_node_against_the_image_says_so_in_words(fake: FakeEngine) -> None:
    code, out, _ = run("verify", "--containers", "a", "--image", IMAGE)
    assert code == 0
    assert out.endswith(f"ok: a matches {IMAGE}\n")


def test_a_node_whose_image_prebuilt_ops_for_other_gpus_is_named(
    fake: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    archs = {"a": ["8.0", "9.0"], "b": ["8.0"]}
    collected = tests.fakes.collected

    def with_ops(box: tests.fakes.FakeContainer, env: dict[str, str], request: Any) -> str:
        report = json.loads(collected(box, env, request))
        ops = {"ops": ["cpu_adam", "fused_adam"], "accelerator": "cuda", "arch": archs[box.name]}
        report["deepspeed_ops"] = ops
        return json.dumps(report, sort_keys=True)

    monkeypatch.setattr(tests.fakes, "collected", with_ops)
    code, out, err = run("verify", "--containers", "a,b")
    assert code == 13
    assert "- b: deepspeed ops arch 8.0 (a: 8.0;9.0)" in err
    assert out.splitlines()[-1].split() == ["deepspeed", "ops", "arch", "8.0;9.0", "8.0"]

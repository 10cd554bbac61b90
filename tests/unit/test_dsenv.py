"""`.deepspeed_env` text (the real reader, pdsh and shell are in tests/conformance)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.cluster.dsenv import deepspeed_env_text, dsenv_for, escape_value
from builder.errors import UsageError
from builder.platforms.gaudi import GAUDI_RUNTIME_DEFAULTS
from builder.resolved import resolve
from builder.spec.loader import load_preset

if TYPE_CHECKING:
    from pathlib import Path


def test_only_sorted_key_value_lines() -> None:
    assert deepspeed_env_text({"B": "2", "A": "x y"}) == "A=x y\nB=2\n"


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("^docker0,lo", "^docker0,lo"),
        ("a b", "a b"),
        ('say "hi" $X `y` \\', 'say \\"hi\\" \\$X \\`y\\` \\\\'),
        ("50%", "50%%"),
    ],
)
def test_escaping(value: str, written: str) -> None:
    assert escape_value("K", value) == written


@pytest.mark.parametrize(("value", "message"), [("a\nb", "line break"), (" a", "blanks")])
def test_values_that_cannot_survive_are_refused(value: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        escape_value("K", value)


def test_gaudi_gets_its_runtime_variables_and_launch_env_wins() -> None:
    text = dsenv_for(resolve(load_preset("gaudi-deepspeed").spec), {"HABANA_LOGS": "/logs"}, None)
    lines = dict(line.split("=", 1) for line in text.splitlines())
    assert lines["GC_KERNEL_PATH"] == GAUDI_RUNTIME_DEFAULTS["GC_KERNEL_PATH"]
    assert lines["HABANA_LOGS"] == "/logs"
    image_env = {"GC_KERNEL_PATH": "/usr/lib/habanalabs/libtpc_kernels.so:/x.so"}
    text = dsenv_for(resolve(load_preset("gaudi-deepspeed").spec), {}, image_env)
    assert "GC_KERNEL_PATH=/usr/lib/habanalabs/libtpc_kernels.so:/x.so\n" in text


def test_cuda_stack_gets_its_launch_env_only() -> None:
    text = dsenv_for(resolve(load_preset("cuda-deepspeed").spec), {}, None)
    # and launch.cache's variables, which a bare node's ranks get nowhere else
    assert text == (
        "HF_HOME=/shared/cache/huggingface\nNCCL_DEBUG=WARN\n"
        "TORCH_HOME=/shared/cache/torch\nTRITON_CACHE_DIR=/shared/cache/triton\n"
    )


def test_cli_writes_the_file_and_rejects_bad_sets(tmp_path: Path) -> None:
    runner = CliRunner()
    target = tmp_path / "cluster" / ".deepspeed_env"
    args = ["dsenv", "--preset", "cuda-deepspeed", "--set", "NCCL_IB_DISABLE=1", "-o", str(target)]
    assert runner.invoke(app, args).exit_code == 0
    assert "NCCL_IB_DISABLE=1\n" in target.read_text()
    bad = runner.invoke(app, ["dsenv", "--preset", "cuda-deepspeed", "--set", "1X=2"])
    assert bad.exit_code == 2
    assert "write it as NAME=VALUE" in bad.stderr
    bad = runner.invoke(app, ["dsenv", "--preset", "cuda-deepspeed", "--set", "A= lead"])
    assert bad.exit_code == 2
    assert "blanks" in bad.stderr

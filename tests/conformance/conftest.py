"""The real consumers of our outputs, installed as test tools: Slurm's scontrol,
DeepSpeed's and torch's own parsers. Missing ones fail under BUILDER_REQUIRE_REAL=1."""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import real_tool, unavailable

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


@pytest.fixture(scope="session")
def scontrol(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], list[str] | None]:
    """Slurm's own expansion of a node list (None where Slurm rejects it)."""
    exe = real_tool("scontrol")
    # `scontrol show hostnames` needs no cluster, but insists on a configuration.
    conf: Path = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    conf.write_text("ClusterName=builder\nSlurmctldHost=localhost\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}

    def expand(nodelist: str) -> list[str] | None:
        result = subprocess.run(
            [exe, "show", "hostnames", nodelist],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if result.returncode != 0 or "Invalid" in result.stderr:
            return None
        return result.stdout.split()

    return expand


def _required(module: str) -> Any:
    """The imported module, or fail/skip saying `make conformance`."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        unavailable(f"{module} is not installed in the test venv ({exc}): run `make conformance`")


@pytest.fixture(scope="session")
def deepspeed_runner() -> object:
    """deepspeed.launcher.runner, the module behind the `deepspeed` command."""
    return _required("deepspeed.launcher.runner")


@pytest.fixture(scope="session")
def torchrun_parser() -> object:
    """torch.distributed.run's own argument parser (what `torchrun` runs)."""
    return _required("torch.distributed.run").get_args_parser()


@pytest.fixture(scope="session")
def distributed_runner() -> Any:
    """optimum-habana 1.20's DistributedRunner (what gaudi_spawn.py runs), loaded from
    the folder `make conformance` installs it to, without its heavy dependencies."""
    import importlib.util
    import sys
    from pathlib import Path

    root = Path(sys.prefix) / "optimum-habana"
    path = root / "optimum/habana/distributed/distributed_runner.py"
    if not path.is_file():
        unavailable(f"optimum-habana is not installed at {root}: run `make conformance`")
    sys.path.insert(0, str(root))  # for its `optimum.utils.logging`
    spec = importlib.util.spec_from_file_location("distributed_runner", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DistributedRunner

"""gaudi_spawn commands run through optimum-habana's own DistributedRunner, a real
bash and DeepSpeed's parser: the hostfile, master, port, script and arguments
arrive as meant, and what would not arrive unchanged is refused up front.

gaudi_spawn.py itself ships only in optimum-habana's examples (not the wheel);
its part is small and mirrored here (optimum-habana 1.20.0): argparse of
`--world_size --hostfile --use_mpi --use_deepspeed --master_port script args...`, then
the script and arguments joined with spaces, each one holding a space wrapped in double
quotes, and DistributedRunner(..., master_port=args.master_port).
"""

from __future__ import annotations

import argparse
import subprocess
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from builder.cluster.hostfile import hostfile_text, hosts_from_nodes
from builder.errors import UsageError
from builder.launch.launchers import gaudi_spawn_argv
from builder.launch.launchers.base import ambiguous_abbreviation
from builder.launch.launchers.deepspeed import LAUNCH_OPTIONS, RUNNER_OPTIONS
from builder.launch.plan import launch_plan
from builder.resolved import resolve
from builder.spec.check import check_spec
from builder.spec.loader import load_preset
from tests.conformance.test_pdsh_path import SHELLS, launch_reads, stand_ins

if TYPE_CHECKING:
    from pathlib import Path

    from builder.spec import Spec


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in ssh and recorder of test_pdsh_path.py."""
    return stand_ins(tmp_path_factory.mktemp("bin"))


def gaudi_spec(**launch: Any) -> Spec:
    spec = load_preset("gaudi-deepspeed").spec
    values = {"launcher": "gaudi_spawn", "nodes": ("hls[1-2]", "hls7"), "slots": 8, **launch}
    return replace(spec, launch=replace(spec.launch, **values))


def gaudi_spawn_main(argv: list[str]) -> tuple[argparse.Namespace, str]:
    """gaudi_spawn.py's parse_args and its command line for DistributedRunner."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--world_size", type=int, default=1)
    parser.add_argument("--hostfile", type=str, default=None)
    parser.add_argument("--use_mpi", action="store_true")
    parser.add_argument("--use_deepspeed", action="store_true")
    parser.add_argument("--master_port", type=int, default=29500)
    parser.add_argument("training_script", type=str)
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    words = [args.training_script, *args.training_script_args]
    quoted = [f'"{w}"' if " " in w and w[0] != '"' and w[-1] != '"' else w for w in words]
    return args, " ".join(quoted)


def through_runner(
    spec: Spec, runner_class: Any, deepspeed_runner: Any, tmp_path: Path, *, planned: bool = True
) -> tuple[Any, list[str]]:
    """The command, run as gaudi_spawn.py would: DistributedRunner's line in bash,
    with `deepspeed` replaced by a function that prints its arguments. planned:
    from the launch plan (which checks the spec); else straight from the emitter."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(hostfile_text(hosts_from_nodes(spec.launch.nodes, spec.launch.slots)))
    if planned:
        plan = launch_plan(
            resolve(spec, runtime_name="none"), image="img:1", cluster_dir=str(tmp_path)
        )
        argv = list(plan.steps[-1].argv)
    else:
        argv = gaudi_spawn_argv(spec.launch, hostfile=str(hostfile), nnodes=3)
    spawn = argv[argv.index("python") + 2 :]
    args, command = gaudi_spawn_main(spawn)
    runner = runner_class(
        command_list=[command],
        world_size=args.world_size,
        hostfile=args.hostfile,
        use_mpi=args.use_mpi,
        use_deepspeed=args.use_deepspeed,
        master_port=args.master_port,
    )
    line = runner._interpreter + command
    shell = subprocess.run(
        ["bash", "-c", f"deepspeed() {{ printf '%s\\0' \"$@\"; }}\n{line}"],
        capture_output=True,
        check=True,
    )
    words = shell.stdout.decode().split("\0")[:-1]
    return deepspeed_runner.parse_args(words), words


def test_the_runner_reads_our_hostfile_and_deepspeed_reads_its_line(
    distributed_runner: Any, deepspeed_runner: Any, tmp_path: Path
) -> None:
    args = ("--config", "my conf.json", "--lr=3e-4", "--out", "/data/run 1/x")
    spec = gaudi_spec(script="train_dir/run.py", args=args, master_port=29511)
    assert check_spec(spec) == []
    parsed, _ = through_runner(spec, distributed_runner, deepspeed_runner, tmp_path)
    assert parsed.hostfile == str(tmp_path / "hostfile")
    assert parsed.master_addr == "hls1"  # the first host of our hostfile
    assert parsed.master_port == 29511  # gaudi_spawn.py's --master_port (PR #641)
    assert parsed.no_local_rank
    assert parsed.user_script == "train_dir/run.py"
    assert parsed.user_args == list(args)
    # and DeepSpeed reads the same hostfile: three nodes, eight slots each
    pool = deepspeed_runner.fetch_hostfile(parsed.hostfile)
    assert list(pool.items()) == [("hls1", 8), ("hls2", 8), ("hls7", 8)]


DEEPSPEED_PARSERS = (RUNNER_OPTIONS, LAUNCH_OPTIONS)
safe = st.text(alphabet="abcXYZ019_@+=:,./ -", min_size=1, max_size=12)


@settings(max_examples=30, deadline=None)
@given(st.lists(safe, max_size=4), st.sampled_from(SHELLS), st.integers(1, 65535))
def test_any_accepted_argument_arrives_unchanged(
    distributed_runner: Any,
    deepspeed_runner: Any,
    tmp_path_factory: Any,
    bin_dir: Path,
    args: list[str],
    shell: str,
    port: int,
) -> None:
    """Through gaudi_spawn.py's bash, DeepSpeed's parser, its PDSHRunner, pdsh and the
    remote shell (test_pdsh_path.py) to DeepSpeed's launch on the node."""
    assume(args[:1] != ["--"])  # refused: test_launchers.py shows the parser drops it
    # refused too: an abbreviation of several of DeepSpeed's options (test_launchers.py)
    assume(not any(ambiguous_abbreviation(a, o) for a in args for o in DEEPSPEED_PARSERS))
    spec = gaudi_spec(args=tuple(args), master_port=port)
    assert check_spec(spec) == []  # every such value is accepted ...
    tmp_path = tmp_path_factory.mktemp("gaudi")
    parsed, words = through_runner(spec, distributed_runner, deepspeed_runner, tmp_path)
    assert parsed.user_args == args
    read = launch_reads(["deepspeed", *words], bin_dir, shell, deepspeed_runner)
    assert read.training_script_args == args  # ... and arrives unchanged
    assert (read.master_addr, read.master_port) == ("hls1", port)


@pytest.mark.parametrize(
    ("where", "spec"),
    [
        ("launch.args[1]", gaudi_spec(args=("--user", "%u"))),
        ("launch.args[1]", gaudi_spec(args=("--name", "%h of %n"))),
        ("launch.script", gaudi_spec(script="train dir/run.py")),
        ("launch.script", gaudi_spec(script="run%n.py")),
    ],
)
def test_what_the_pdsh_line_would_change_is_refused(
    distributed_runner: Any,
    deepspeed_runner: Any,
    bin_dir: Path,
    tmp_path: Path,
    where: str,
    spec: Spec,
) -> None:
    """(A '%' that ends the line is refused too: pdsh reads past it, so what arrives
    depends on its memory, as the issue's `50%IS_SANDBOX=yes` shows.)"""
    problems = dict(check_spec(spec))
    assert where in problems
    _, words = through_runner(spec, distributed_runner, deepspeed_runner, tmp_path, planned=False)
    read = launch_reads(["deepspeed", *words], bin_dir, "bash", deepspeed_runner)
    sent = (spec.launch.script, list(spec.launch.args))
    assert (read.training_script, read.training_script_args) != sent  # refusing was right


@pytest.mark.parametrize("value", ["$HOME", "it's", 'say "hi"', "a;b", "`id`", "x\ny"])
def test_what_bash_would_change_is_refused_and_would_have_changed(
    distributed_runner: Any, deepspeed_runner: Any, tmp_path: Path, value: str
) -> None:
    spec = gaudi_spec(args=("--name", value))
    problems = dict(check_spec(spec))
    assert "launch.args[1]" in problems
    assert repr(value) in problems["launch.args[1]"]
    try:
        parsed, _ = through_runner(
            spec, distributed_runner, deepspeed_runner, tmp_path, planned=False
        )
    except (subprocess.CalledProcessError, SystemExit):
        return  # bash or the parser broke on it: refusing it was right
    assert parsed.user_args != ["--name", value]
    with pytest.raises(UsageError, match=r"launch\.args\[1\]"):
        launch_plan(resolve(spec, runtime_name="none"), image="i:1", cluster_dir=str(tmp_path))


def test_a_master_it_cannot_carry_is_refused_and_any_port_is_taken() -> None:
    problems = dict(check_spec(gaudi_spec(master_port=29511, master_addr="hls2")))
    assert "launch.master_port" not in problems
    assert "first host" in problems["launch.master_addr"]


def test_a_cluster_folder_bash_would_split_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cluster-dir"):
        launch_plan(
            resolve(gaudi_spec(), runtime_name="none"),
            image="i:1",
            cluster_dir=str(tmp_path / "my cluster"),
        )

"""Our launcher commands read back by DeepSpeed's and torch's own parsers, and every
argument surviving one round of shell quoting (shlex.join, then a real bash)."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shlex
import subprocess
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn
from unittest import mock

from hypothesis import example, given, settings
from hypothesis import strategies as st

from builder.launch.launchers import deepspeed_argv, torchrun_argv
from builder.launch.launchers.deepspeed import LAUNCH_OPTIONS, RUNNER_OPTIONS
from builder.launch.launchers.torchrun import TORCHRUN_OPTIONS
from builder.launch.plan import launch_plan
from builder.resolved import resolve
from builder.spec.check import launcher_problems
from builder.spec.loader import load_preset

if TYPE_CHECKING:
    from pathlib import Path

ARGS = ("--config", "my conf.json", "--name", "it's $HOME; `x`", "--emoji", "✓", "--nl", "a\nb")


def launch_section() -> Any:
    spec = load_preset("cpu-deepspeed").spec
    return replace(spec.launch, script="train dir/train.py", args=ARGS, master_port=29511)


def test_deepspeed_reads_what_we_meant(deepspeed_runner: Any) -> None:
    # one node: DeepSpeed runs the launch as an argv (on more, the values are escaped for
    # its pdsh line and arrive there: test_pdsh_path.py)
    argv = deepspeed_argv(
        launch_section(), hostfile="/etc/builder/cluster/hostfile", master_addr="node1", nnodes=1
    )
    args = deepspeed_runner.parse_args(argv[1:])
    assert args.hostfile == "/etc/builder/cluster/hostfile"
    assert args.master_addr == "node1"
    assert args.master_port == 29511
    assert args.user_script == "train dir/train.py"
    assert args.user_args == list(ARGS)
    assert args.launcher == "pdsh"
    assert args.ssh_port is None


def test_deepspeed_ssh_port_when_asked(deepspeed_runner: Any) -> None:
    argv = deepspeed_argv(launch_section(), hostfile="h", master_addr="n", nnodes=2, ssh_port=2222)
    assert deepspeed_runner.parse_args(argv[1:]).ssh_port == 2222


def test_torchrun_c10d_reads_what_we_meant(torchrun_parser: Any) -> None:
    argv = torchrun_argv(launch_section(), nnodes=3, master_addr="node1", rdzv_id="job-7")
    args = torchrun_parser.parse_args(argv[1:])
    assert (args.nnodes, args.nproc_per_node) == ("3", "2")
    assert (args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id) == ("c10d", "node1:29511", "job-7")
    assert args.training_script == "train dir/train.py"
    assert args.training_script_args == list(ARGS)


def test_torchrun_static_reads_what_we_meant(torchrun_parser: Any) -> None:
    argv = torchrun_argv(launch_section(), nnodes=2, master_addr="n1", rdzv_id="x", node_rank=1)
    args = torchrun_parser.parse_args(argv[1:])
    assert (args.node_rank, args.master_addr, args.master_port) == (1, "n1", 29511)
    assert args.rdzv_backend == "static"


def test_the_planned_launcher_parses_too(deepspeed_runner: Any, torchrun_parser: Any) -> None:
    spec = load_preset("cpu-deepspeed").spec
    plan = launch_plan(resolve(spec, runtime_name="docker"), image="img:1", cluster_dir="/c")
    exec_argv = list(plan.steps[-1].argv)
    launcher = exec_argv[exec_argv.index("deepspeed") + 1 :]
    assert deepspeed_runner.parse_args(launcher).hostfile == "/etc/builder/cluster/hostfile"
    plan = launch_plan(resolve(spec, launcher_name="torchrun"), image="img:1", cluster_dir="/c")
    run = list(plan.steps[0].argv)
    assert torchrun_parser.parse_args(run[run.index("torchrun") + 1 :]).nnodes == "2"


arguments = st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\0")), max_size=5)
dashes = st.lists(st.sampled_from(["--", "-", "--x", "-h", "x", "--help"]), max_size=3)


@settings(max_examples=80, deadline=None)
@given(st.one_of(arguments, dashes))
@example(["--"])
@example(["--", "--x"])
def test_accepted_arguments_reach_the_script_through_both_parsers(
    deepspeed_runner: Any, torchrun_parser: Any, args: list[str]
) -> None:
    """What the spec accepts, the launcher's own parser gives the script unchanged; what
    it would drop (a '--' first: argparse's REMAINDER eats it) the spec refuses."""
    spec = load_preset("cpu-deepspeed").spec
    launch = replace(launch_section(), args=tuple(args))
    spec = replace(spec, launch=launch)
    deepspeed = deepspeed_runner.parse_args(
        deepspeed_argv(launch, hostfile="h", master_addr="n", nnodes=1)[1:]
    )
    torchrun = torchrun_parser.parse_args(
        torchrun_argv(launch, nnodes=2, master_addr="n", rdzv_id="j")[1:]
    )
    for name, arrived in (
        ("deepspeed", deepspeed.user_args),
        ("torchrun", torchrun.training_script_args),
    ):
        problems = launcher_problems(spec.image, replace(launch, launcher=name))
        if problems:
            assert [path for path, _ in problems] == ["launch.args[0]"]
            assert args[0] == "--"
            assert arrived != args  # refusing it was right
        else:
            assert arrived == args


@settings(max_examples=80, deadline=None)
@given(arguments)
def test_any_argument_survives_display_quoting(args: list[str]) -> None:
    argv = deepspeed_argv(
        replace(launch_section(), args=tuple(args)), hostfile="h", master_addr="n", nnodes=2
    )
    shown = shlex.join(argv)
    assert shlex.split(shown) == argv
    # and a real shell given the displayed command passes the same argv on
    out = subprocess.run(
        ["bash", "-c", 'shift; printf "%s\\0" "$@"', "_", *shlex.split(shown)],
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8", "surrogateescape")
    assert out.split("\0")[:-1] == argv[1:]
    shell = subprocess.run(
        ["bash", "-c", f'printf "%s\\0" {shown}'], capture_output=True, check=True
    ).stdout.decode("utf-8", "surrogateescape")
    assert shell.split("\0")[:-1] == argv


def _long_options(parser: argparse.ArgumentParser) -> tuple[str, ...]:
    return tuple(sorted(o for a in parser._actions for o in a.option_strings if o[:2] == "--"))


def _parser_of(parse: Any, *argv: object) -> argparse.ArgumentParser:
    """The ArgumentParser a module's parse function builds (it is asked, never run)."""
    built: list[argparse.ArgumentParser] = []

    def capture(self: argparse.ArgumentParser, *_: object, **__: object) -> NoReturn:
        built.append(self)
        raise SystemExit(0)

    with (
        mock.patch.object(argparse.ArgumentParser, "parse_args", capture),
        contextlib.suppress(SystemExit),
    ):
        parse(*argv)
    return built[0]


def test_the_option_lists_are_the_real_parsers(
    deepspeed_runner: Any, torchrun_parser: argparse.ArgumentParser
) -> None:
    """What launch.args is checked against is what the installed parsers take."""
    from deepspeed.launcher import launch

    assert _long_options(_parser_of(deepspeed_runner.parse_args, ["x"])) == RUNNER_OPTIONS
    assert _long_options(_parser_of(launch.parse_args)) == LAUNCH_OPTIONS
    assert _long_options(torchrun_parser) == TORCHRUN_OPTIONS


@given(arg=st.from_regex(r"--[a-z_=-]{0,8}", fullmatch=True))
@settings(max_examples=150, deadline=None)
@example(arg="--=")
@example(arg="--master")
@example(arg="--n")
def test_an_argument_is_refused_exactly_when_a_parser_would_stop_at_it(
    deepspeed_runner: Any, torchrun_parser: argparse.ArgumentParser, arg: str
) -> None:
    for name, parse in (
        ("deepspeed", lambda a: deepspeed_runner.parse_args(["--hostfile", "/h", "t.py", *a])),
        ("torchrun", lambda a: torchrun_parser.parse_args(["--nnodes", "1", "t.py", *a])),
    ):
        spec = load_preset("cpu-deepspeed").spec
        refused = any(
            path == "launch.args[1]"
            for path, _ in launcher_problems(
                spec.image, replace(spec.launch, launcher=name, args=("x", arg))
            )
        )
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):
                parse(["x", arg])
            stopped = False
        except SystemExit:
            stopped = "ambiguous option" in stderr.getvalue()
        if name == "torchrun" or not refused:
            assert refused == stopped, (name, arg, stderr.getvalue()[-300:])
        else:  # deepspeed: also refused for deepspeed.launcher.launch on the nodes
            assert refused


def test_the_deepspeed_batch_command_is_what_deepspeeds_parser_reads(
    deepspeed_runner: Any, tmp_path: Path
) -> None:
    """The srun line as the batch script writes it, read by a real bash (the batch
    shell: SLURM_NODEID is 0 there), then by the task's sh, where srun made it 1: the
    node's rank is the task's own."""
    from builder.launch.plan import Placement, prepare
    from builder.schedulers.slurm.script import ENDPOINT, JOB, MASTER, NNODES, shell_line

    spec = load_preset("cpu-deepspeed").spec
    resolved = resolve(spec, runtime_name="none", scheduler_name="slurm")
    placement = Placement((), MASTER, JOB, nnodes=NNODES, endpoint=ENDPOINT, batch=True)
    _, command = prepare(resolved, "i:1", "/shared/c", placement)
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "sh").write_text('#!/bin/bash\nSLURM_NODEID=1 exec /bin/sh "$@"\n')
    (shims / "deepspeed").write_text("#!/bin/sh\nprintf '%s\\0' deepspeed \"$@\"\n")
    for shim in shims.iterdir():
        shim.chmod(0o755)
    env = {
        "SLURM_JOB_ID": "7",
        "SLURM_NODEID": "0",
        "MASTER_ADDR": "n1",
        "PATH": f"{shims}:{os.environ['PATH']}",
    }
    line = shell_line(command.argv)
    done = subprocess.run(["bash", "-c", line], env=env, capture_output=True, check=True)
    words = done.stdout.decode().split("\0")[:-1]
    args = deepspeed_runner.parse_args(words[1:])
    assert (args.hostfile, args.master_addr, args.no_ssh, args.node_rank) == (
        "/shared/c/hostfile-7",
        "n1",
        True,
        1,
    )
    assert (args.user_script, args.master_port) == ("train.py", 29500)


def test_a_restart_policy_is_what_torchs_parser_reads(torchrun_parser: Any) -> None:
    """launch.restarts, min_nodes and rendezvous_timeout as torch.distributed.run reads
    them, in the ssh plan and the batch script alike (one torchrun_argv)."""
    spec = load_preset("cpu-deepspeed").spec
    launch = replace(
        spec.launch, launcher="torchrun", restarts=3, min_nodes=1, rendezvous_timeout=120
    )
    argv = torchrun_argv(launch, nnodes=2, master_addr="n1", rdzv_id="r")
    args = torchrun_parser.parse_args(argv[1:])
    assert (args.max_restarts, args.nnodes) == (3, "1:2")
    assert args.training_script == "train.py"
    # the rendezvous settings as torch's c10d handler reads them (dynamic_rendezvous's
    # create_handler: *_timeout and keep_alive_* through RendezvousParameters.get_as_int)
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous.utils import _parse_rendezvous_config

    def read(conf: str) -> dict[str, int | None]:
        params = RendezvousParameters(
            "c10d", "n1:29500", "r", 1, 2, **_parse_rendezvous_config(conf)
        )
        keys = (
            "join_timeout",
            "last_call_timeout",
            "keep_alive_interval",
            "keep_alive_max_attempt",
        )
        return {key: params.get_as_int(key) for key in keys}

    assert read(args.rdzv_conf) == {
        "join_timeout": 120,
        "last_call_timeout": 3,  # builder's elastic defaults: a lost node regroups in ~10 s
        "keep_alive_interval": 2,
        "keep_alive_max_attempt": 3,
    }
    mine = replace(launch, node_timeout=30, last_call=20)
    args = torchrun_parser.parse_args(
        torchrun_argv(mine, nnodes=2, master_addr="n1", rdzv_id="r")[1:]
    )
    assert read(args.rdzv_conf) == {
        "join_timeout": 120,
        "last_call_timeout": 20,
        "keep_alive_interval": 10,
        "keep_alive_max_attempt": 3,
    }
    fixed = replace(launch, min_nodes=None)
    args = torchrun_parser.parse_args(
        torchrun_argv(fixed, nnodes=2, master_addr="n1", rdzv_id="r")[1:]
    )
    assert args.rdzv_conf == "join_timeout=120"  # not elastic: no node is given up

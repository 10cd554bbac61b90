"""The master, script and arguments of a multi-node deepspeed launch, through DeepSpeed's
own PDSHRunner.get_cmd, real pdsh (its ssh module) and bash or dash as the remote
login shell: the launch on the node gets exactly what the spec says, or the spec is
refused.

pdsh (2.34) substitutes %h %u %n %% in each word of the command on its own, then runs
`ssh -oConnectTimeout=10 -2 -a -x HOST WORD...`; ssh joins the words with blanks and
sshd runs `$SHELL -c LINE`. A stand-in `ssh` first on PATH does the same here, so that
no sshd is needed; the integration tests run the real one.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from builder.launch.actions import HostCommand
from builder.launch.launchers import deepspeed_argv
from builder.launch.launchers.base import ambiguous_abbreviation
from builder.launch.launchers.deepspeed import LAUNCH_OPTIONS, RUNNER_OPTIONS
from builder.launch.plan import launch_plan
from builder.resolved import resolve
from builder.spec.check import launcher_problems
from builder.spec.loader import load_preset
from tests.conftest import real_tool

if TYPE_CHECKING:
    from builder.spec.records import LaunchSpec

SHELLS = ("bash", "dash")
STAND_IN_SSH = """#!/bin/sh
# what ssh and sshd do with pdsh's `ssh -OPTION... HOST WORD...`
while [ "${1#-}" != "$1" ]; do shift; done
shift
IFS=' '
exec "$REMOTE_SHELL" -c "$*"
"""
# What the launch would have run, recorded instead: its argv, base64 on one line
# (pdsh prefixes each output line with the host).
RECORDER = """#!/bin/sh
printf '%s\\0' "$@" | base64 -w0; echo
"""
TRICKY = (
    "it's $HOME; `x`",
    "50%",
    "%h %u %n %% %",
    "a  b",
    'say "hi" \\" \\\\',
    "ünïcødé ✓",
    "",
    "tab\there",
    "x\ny",
    "$(id) ${PATH} !! ~ * ? [a] {a,b} | & ; < > #",
)


def stand_ins(folder: Path) -> Path:
    """folder with the stand-in ssh and the recorder (the node's python)."""
    for name, text in (("ssh", STAND_IN_SSH), ("recorder", RECORDER)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stand_ins(tmp_path_factory.mktemp("bin"))


def pdsh_line(runner_module: Any, argv: list[str], python: str) -> tuple[list[str], dict[str, str]]:
    """The pdsh command DeepSpeed's own runner builds for our argv, on one node named
    localhost (the hostfile is not read: get_cmd takes the resources as given)."""
    from deepspeed.launcher.multinode_runner import PDSHRunner

    args = runner_module.parse_args(argv[1:])
    world_info = runner_module.encode_world_info({"localhost": [0]})
    runner = PDSHRunner(args, world_info)
    runner.add_export("PYTHONPATH", str(Path.cwd()))  # runner.main always exports it
    with mock.patch.object(sys, "executable", python):
        cmd, _, env = runner.get_cmd({}, {"localhost": [0]})
    return cmd, env


def through_pdsh(cmd: list[str], env: dict[str, str], bin_dir: Path, shell: str) -> str:
    """Run DeepSpeed's pdsh command (with its environment: PDSH_RCMD_TYPE=ssh)."""
    pdsh = real_tool("pdsh")
    run_env = {**os.environ, **env, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    run_env["REMOTE_SHELL"] = real_tool(shell)
    result = subprocess.run([pdsh, *cmd[1:]], capture_output=True, env=run_env, check=False)
    assert result.returncode == 0, result.stderr.decode("utf-8", "replace")
    return result.stdout.decode("utf-8", "surrogateescape")


def launch_reads(argv: list[str], bin_dir: Path, shell: str, runner_module: Any) -> Any:
    """What deepspeed.launcher.launch on the node parses from the line that arrives."""
    from deepspeed.launcher import launch

    cmd, env = pdsh_line(runner_module, argv, str(bin_dir / "recorder"))
    out = through_pdsh(cmd, env, bin_dir, shell)
    host, _, encoded = out.strip().partition(": ")
    assert host == "localhost"
    words = base64.b64decode(encoded).decode("utf-8", "surrogateescape").split("\0")[:-1]
    assert words[:3] == ["-u", "-m", "deepspeed.launcher.launch"]
    with mock.patch.object(sys, "argv", ["launch", *words[3:]]):
        return launch.parse_args()


def section(**values: Any) -> LaunchSpec:
    spec = load_preset("cpu-deepspeed").spec
    return replace(spec.launch, **values)


text = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=12)
specials = st.text(st.sampled_from("%hun$`'\"\\ \t\n;&|*?~!#(){}[]<>é✓-=x"), max_size=12)
values = st.one_of(text, specials)
PARSERS = (RUNNER_OPTIONS, LAUNCH_OPTIONS)
scripts = values.filter(lambda s: s != "" and not s.startswith("-"))


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(SHELLS), scripts, st.lists(values, max_size=4), values)
@example("dash", "my dir/train.py", list(TRICKY), "it's $HOME; `x`")
@example("bash", "50%", ["50%"], "50%")
def test_random_values_arrive_unchanged(
    deepspeed_runner: Any, bin_dir: Path, shell: str, script: str, args: list[str], master: str
) -> None:
    assume(args[:1] != ["--"])  # refused: the parsers drop it (test_launchers.py)
    # a master starting with '-' is an option to argparse: refused like any non-address
    # (test_a_master_that_is_no_address_is_refused); every other value must arrive
    assume(not master.startswith("-"))
    # refused too: an abbreviation of several of the parsers' own options (test_launchers.py)
    assume(not any(ambiguous_abbreviation(a, o) for a in args for o in PARSERS))
    launch = section(script=script, args=tuple(args), master_port=29511)
    argv = deepspeed_argv(launch, hostfile="h", master_addr=master, nnodes=2)
    read = launch_reads(argv, bin_dir, shell, deepspeed_runner)
    assert read.master_addr == master
    assert read.master_port == 29511
    assert read.node_rank == 0  # pdsh's %n, left alone
    assert read.training_script == script
    assert read.training_script_args == args


@pytest.mark.parametrize("shell", SHELLS)
def test_unescaped_values_would_not_arrive(
    deepspeed_runner: Any, bin_dir: Path, shell: str
) -> None:
    """What the issue saw: without pdsh_word the line changes them (so the escaping is
    what makes test_random_values_arrive_unchanged pass)."""
    argv = ["deepspeed", "--hostfile", "h", "--master_addr", "n1", "my dir/train.py"]
    argv += ["it's $HOME; `x`", "50%"]
    read = launch_reads(argv, bin_dir, shell, deepspeed_runner)
    assert read.training_script == "my"
    assert read.training_script_args != ["it's $HOME; `x`", "50%"]


@pytest.mark.parametrize("shell", SHELLS)
def test_the_script_gets_its_argv(
    deepspeed_runner: Any, bin_dir: Path, tmp_path: Path, shell: str
) -> None:
    """End to end: DeepSpeed's launch on the node starts the script, which writes the
    sys.argv it got; the planned command for two nodes, as the first node runs it."""
    folder = tmp_path / "my dir $x"
    folder.mkdir()
    script = folder / "it's 50% `x`.py"
    record = tmp_path / "argv"
    script.write_text(f"import json, sys\nopen({str(record)!r}, 'w').write(json.dumps(sys.argv))\n")
    spec = load_preset("cpu-deepspeed").spec
    spec = replace(spec, launch=replace(spec.launch, script=str(script), args=TRICKY))
    plan = launch_plan(resolve(spec, runtime_name="none"), image="i:1", cluster_dir="/c")
    argv = list(plan.steps[-1].argv)
    argv = argv[argv.index("deepspeed") :]
    cmd, env = pdsh_line(deepspeed_runner, argv, sys.executable)
    through_pdsh(cmd, {**env, "PYTHONPATH": str(Path.cwd())}, bin_dir, shell)
    got = json.loads(record.read_text())
    assert got == [str(script), "--local_rank=0", *TRICKY]


def test_one_node_takes_no_shell_and_no_escaping(deepspeed_runner: Any) -> None:
    """On one node DeepSpeed runs its launch as an argv: the values go as they are."""
    launch = section(script="my dir/x.py", args=TRICKY)
    argv = deepspeed_argv(launch, hostfile="h", master_addr="n1", nnodes=1)
    read = deepspeed_runner.parse_args(argv[1:])
    assert (read.user_script, read.user_args) == ("my dir/x.py", list(TRICKY))


@pytest.mark.parametrize("master", ["my host", "$(id)", "a;b", "50%", "-x", "[::1]", ""])
def test_a_master_that_is_no_address_is_refused(master: str) -> None:
    spec = load_preset("cpu-deepspeed").spec
    problems = dict(launcher_problems(spec.image, section(master_addr=master)))
    assert "not a host name or address" in problems["launch.master_addr"]


@pytest.mark.parametrize("master", ["node1", "10.0.0.7", "fe80::1", "n-1.example.org"])
def test_host_names_and_addresses_are_taken(master: str) -> None:
    spec = load_preset("cpu-deepspeed").spec
    assert launcher_problems(spec.image, section(master_addr=master)) == []


def test_a_script_deepspeed_would_read_as_an_option_is_refused() -> None:
    spec = load_preset("cpu-deepspeed").spec
    problems = dict(launcher_problems(spec.image, section(script="-x.py")))
    assert "./-x.py" in problems["launch.script"]


def test_a_bare_node_rank_gets_the_cache_and_the_secrets(
    deepspeed_runner: Any, bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runtime none: the ranks pdsh starts get no environment from the node's own sshd.
    The planned launcher, its .deepspeed_env read as DeepSpeed's runner reads it, real
    pdsh and bash: the rank starts in launch.code and sees launch.cache's variables and
    the secret (sourced from the bundle's 0600 file, whose path alone is on the line)."""
    from builder.cluster.dsenv import dsenv_for
    from builder.launch.secrets import secret_files
    from builder.output import write_files

    code, cache, cluster = tmp_path / "code", tmp_path / "cache", tmp_path / "cluster"
    code.mkdir()
    record = tmp_path / "seen.json"
    (code / "train.py").write_text(
        "import json, os\n"
        f"open({str(record)!r}, 'w').write(json.dumps({{'cwd': os.getcwd(), **{{k: "
        "os.environ.get(k) for k in ('HF_HOME', 'TORCH_HOME', 'HF_TOKEN', 'NCCL_DEBUG')}}))\n"
    )
    spec = load_preset("cpu-deepspeed").spec
    launch = replace(
        spec.launch,
        code=str(code),
        cache=str(cache),
        env={"HF_TOKEN": "hf_s3cr3t x", "NCCL_DEBUG": "INFO"},
    )
    resolved = resolve(replace(spec, launch=launch), runtime_name="none")
    write_files(secret_files(resolved.spec), cluster, force=False)
    plan = launch_plan(resolved, image="i:1", cluster_dir=str(cluster))
    action = plan.steps[-1].action
    assert isinstance(action, HostCommand)
    assert action.workdir == str(code)
    monkeypatch.chdir(code)  # where the launch step starts the launcher
    argv = list(action.command)
    assert "hf_s3cr3t x" not in " ".join(argv)
    # what runner.main does with DS_ENV_FILE before get_cmd
    from deepspeed.launcher.multinode_runner import PDSHRunner

    args = deepspeed_runner.parse_args(argv[1:])
    runner = PDSHRunner(args, deepspeed_runner.encode_world_info({"localhost": [0]}))
    runner.add_export("PYTHONPATH", str(Path.cwd()))
    for line in dsenv_for(resolved, {}, None).splitlines():
        key, val = line.split("=", 1)
        runner.add_export(key.strip(), val.strip())
    with mock.patch.object(sys, "executable", sys.executable):
        cmd, _, env = runner.get_cmd({}, {"localhost": [0]})
    assert "hf_s3cr3t x" not in " ".join(cmd)
    through_pdsh(cmd, env, bin_dir, "bash")
    assert json.loads(record.read_text()) == {
        "cwd": str(code),
        "HF_HOME": f"{cache}/huggingface",
        "TORCH_HOME": f"{cache}/torch",
        "HF_TOKEN": "hf_s3cr3t x",
        "NCCL_DEBUG": "INFO",
    }

"""The sbatch script's shape per runtime (a real Slurm runs it in tests/integration)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.errors import SpecError, UsageError
from builder.launch.plan import launch_plan
from builder.resolved import resolve
from builder.schedulers.slurm.script import sbatch_script
from builder.schedulers.slurm.section import Slurm
from builder.spec.loader import Stack, load_preset
from builder.spec.presets import preset_names, preset_text
from tests.conftest import real_tool

if TYPE_CHECKING:
    from pathlib import Path

    from builder.spec.records import Spec


def command_line(text: str) -> str:
    """The srun step's command: the script's line that ends in `|| status=$?`."""
    (line,) = [line for line in text.splitlines() if line.endswith(" || status=$?")]
    return line.removesuffix(" || status=$?").strip()


def with_slurm(spec: Spec, **changes: object) -> Spec:
    """spec with launch.slurm changed."""
    slurm = replace(spec.launch.section(Slurm), **changes)  # type: ignore[arg-type]
    return replace(spec, launch=spec.launch.with_section(slurm))


def script(preset: str = "cuda-torchrun", **launch: object) -> str:
    """The preset's script; a Slurm record without CPUs gets 16 per task, and runtime
    docker is accepted (launch.slurm.docker), unless the test says otherwise."""
    spec = load_preset(preset).spec
    section = launch.pop("slurm", None)
    spec = replace(spec, launch=replace(spec.launch, **launch))  # type: ignore[arg-type]
    if isinstance(section, Slurm):
        spec = replace(spec, launch=spec.launch.with_section(section))
    slurm = spec.launch.section(Slurm)
    cpus = {} if slurm.cpus_per_task or slurm.cpus_per_node else {"cpus_per_task": 16}
    spec = with_slurm(spec, **cpus, docker=True)
    runtime = spec.launch.runtime if "runtime" in launch else None
    return sbatch_script(
        resolve(Stack(spec, "s", None), runtime_name=runtime, scheduler_name="slurm"),
        image="team/t:1",
        cluster_dir="/shared/c",
    )


@pytest.mark.parametrize("runtime", ["apptainer", "singularity", "docker", "none"])
def test_every_runtime_passes_shellcheck(runtime: str, tmp_path: Path) -> None:
    path = tmp_path / "job.sbatch"
    path.write_text(script(runtime=runtime, args=("--name", "it's $x")))
    subprocess.run([real_tool("shellcheck"), str(path)], check=True)
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_options_from_the_spec() -> None:
    text = script(
        slurm=Slurm(
            partition="gpu",
            account="ml",
            time="02:00:00",
            cpus_per_task=16,
            exclusive=True,
        )
    )
    options = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert options == [
        "#SBATCH --job-name=cuda-torchrun",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --cpus-per-task=16",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=ml",
        "#SBATCH --time=02:00:00",
        "#SBATCH --exclusive",
        "#SBATCH --output=%x-%j.out",
    ]


def test_apptainer_reinjects_the_environment_and_uses_the_sif() -> None:
    text = script(runtime="apptainer")
    assert "export APPTAINERENV_NCCL_DEBUG=WARN" in text
    # torchrun reads nothing of the cluster folder: the code, the cache and the job's logs
    assert (
        "apptainer exec --cleanenv --nv --bind /shared/project:/workspace "
        "--bind /shared/cache:/shared/cache --bind /shared/c/logs:/shared/c/logs "
        "--pwd /workspace t-1.sif sh -c " in text
    )
    assert "export APPTAINERENV_HF_HOME=/shared/cache/huggingface" in text
    assert '--rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv-id "$SLURM_JOB_ID"' in text


def test_docker_runs_in_the_foreground_and_removes_the_container() -> None:
    text = script(runtime="docker")
    run_line = command_line(text)
    assert " -- docker run --rm --network host --gpus all" in run_line
    assert "--detach" not in run_line


def test_exported_values_survive_the_batch_shell(tmp_path: Path) -> None:
    text = script(runtime="none", env={"V": "a b $c 'd' \"e\""})
    exports = "\n".join(line for line in text.splitlines() if line.startswith("export V="))
    out = subprocess.run(
        ["bash", "-c", f'{exports}; printf %s "$V"'], capture_output=True, text=True, check=True
    )
    assert out.stdout == "a b $c 'd' \"e\""


def test_every_preset_gets_a_batch_script(tmp_path: Path) -> None:
    """The README's own sequence on the default preset: deepspeed runs under Slurm too."""
    for preset in preset_names():
        target = tmp_path / f"{preset}.sbatch"
        result = CliRunner().invoke(app, ["slurm", "--preset", preset, "-o", str(target)])
        assert result.exit_code == 0, (preset, result.stderr)
        subprocess.run([real_tool("shellcheck"), str(target)], check=True)


def test_deepspeed_runs_no_ssh_on_every_node_from_the_jobs_hostfile() -> None:
    text = script("cpu-deepspeed", runtime="none")
    hostfile = '/shared/c/hostfile-"$SLURM_JOB_ID"'
    assert f"printf '%s slots=2\\n' \"${{nodes[@]}}\" > {hostfile}\n" in text
    line = text.split("--kill-on-bad-exit=1")[1]
    # the node's rank is read in the task (the batch shell's SLURM_NODEID is always 0)
    by_node = 'sh -c \'exec deepspeed --node_rank "$SLURM_NODEID" "$@"\' deepspeed-node'
    assert f'{by_node} --hostfile {hostfile} --master_addr "$MASTER_ADDR" --no_ssh' in line
    assert "--master_port 29500 train.py" in line
    assert "#SBATCH --ntasks-per-node=1\n" in text
    assert "pdsh" not in line


def test_srun_starts_one_task_per_rank_with_slurms_numbers(tmp_path: Path) -> None:
    text = script("cuda-torchrun", launcher="srun", runtime="apptainer")
    assert "#SBATCH --ntasks-per-node=8\n" in text
    assert "srun --ntasks-per-node=8 " in text
    # what each task runs, by a real sh, with Slurm's variables set
    from builder.launch.launchers.srun import RANKS

    env = {
        "SLURM_PROCID": "9",
        "SLURM_LOCALID": "1",
        "SLURM_NTASKS": "16",
        "SLURM_NTASKS_PER_NODE": "8",
        "PATH": os.environ["PATH"],
    }
    names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
    probe = f"import os; print(*(os.environ[k] for k in {names!r}))"
    done = subprocess.run(
        ["sh", "-c", RANKS, "srun-rank", sys.executable, "-c", probe],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["9", "1", "16", "8"]
    # apptainer's --cleanenv would drop them: each task passes them (and its GPUs) in
    for name in ("SLURM_PROCID", "MASTER_ADDR", "CUDA_VISIBLE_DEVICES"):
        assert f" {name} " in text


def test_srun_runs_only_under_slurm() -> None:
    spec = load_preset("cpu-deepspeed").spec
    with pytest.raises(UsageError, match="Slurm job's tasks"):
        launch_plan(resolve(spec, launcher_name="srun"), image="i:1", cluster_dir="/c")


@pytest.mark.parametrize(
    ("launcher", "says"), [("mpirun", "launcher srun"), ("gaudi_spawn", "launcher deepspeed")]
)
def test_launchers_that_need_ssh_say_what_runs_under_slurm(launcher: str, says: str) -> None:
    preset = "gaudi-deepspeed" if launcher == "gaudi_spawn" else "cpu-deepspeed"
    spec = load_preset(preset).spec
    image = replace(spec.image, openmpi=True)
    spec = replace(spec, image=image, launch=replace(spec.launch, launcher=launcher))
    with pytest.raises(UsageError, match=says):
        sbatch_script(
            resolve(Stack(spec, "s", None), scheduler_name="slurm"),
            image="team/t:1",
            cluster_dir="/shared/c",
        )


@pytest.mark.parametrize(
    ("preset", "names"),
    [
        ("cuda-torchrun", ["CUDA_VISIBLE_DEVICES"]),
        ("rocm-deepspeed", ["ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"]),
        ("gaudi-deepspeed", ["HABANA_VISIBLE_DEVICES", "HABANA_VISIBLE_MODULES"]),
    ],
)
def test_apptainer_passes_the_jobs_devices_in(preset: str, names: list[str]) -> None:
    """--cleanenv drops what Slurm sets for the job's GPUs: each task passes it in as
    APPTAINERENV_NAME where it is set (a real sh runs the wrapper)."""
    spec = load_preset(preset).spec
    resolved = resolve(spec, runtime_name="apptainer", scheduler_name="slurm")
    text = sbatch_script(resolved, image="team/t:1", cluster_dir="/shared/c")
    for name in names:
        assert f" {name} " in text
    from builder.launch.actions import ApptainerExec

    action = ApptainerExec("apptainer", "x.sif", (), inherit=tuple(names))
    argv = action.argv()
    wrapper = [*argv[: argv.index("--") + 1], "sh", "-c", "env | grep ^APPTAINERENV_ | sort"]
    env = {"PATH": os.environ["PATH"], names[0]: "2,3"}
    done = subprocess.run(wrapper, env=env, capture_output=True, text=True, check=True)
    assert done.stdout == f"APPTAINERENV_{names[0]}=2,3\n"  # unset ones stay unset


def test_gpu_layout_that_contradicts_the_slots_is_refused() -> None:
    with pytest.raises(SpecError, match=r"gpus_per_task.*set gpus_per_task to 8"):
        script(slurm=Slurm(cpus_per_task=8, gpus_per_task=2))
    text = script(slurm=Slurm(cpus_per_task=8, gpus_per_task=8, gpu_bind="closest", mem="0"))
    for line in ("--gpus-per-task=8", "--gpu-bind=closest", "--mem=0"):
        assert f"#SBATCH {line}\n" in text
    one = replace(load_preset("cuda-torchrun").spec.launch, slots=1)
    srun = script(
        "cuda-torchrun",
        launcher="srun",
        slots=1,
        nodes=one.nodes,
        slurm=Slurm(cpus_per_task=8, gpus_per_task=1, gpus_per_node=1),
    )
    assert "#SBATCH --gpus-per-task=1\n" in srun


@pytest.mark.parametrize(
    ("slurm", "field"),
    [
        (Slurm(cpus_per_task=8, gpus_per_task=1), "launch.slurm.gpus_per_task"),
        (Slurm(cpus_per_task=8, gpu_bind="closest"), "launch.slurm.gpu_bind"),
        (Slurm(cpus_per_task=8, gpu_bind="map_gpu:0,1,2,3,4,5,6,7"), "launch.slurm.gpu_bind"),
    ],
)
def test_a_rank_per_task_bound_to_its_own_gpu_is_refused(slurm: Slurm, field: str) -> None:
    """srun's tasks are ranks: bound to one GPU each, a task sees it as device 0 while its
    LOCAL_RANK (SLURM_LOCALID) counts up, so set_device(LOCAL_RANK) fails (pyxis#73)."""
    with pytest.raises(SpecError, match=rf"{field}.*LOCAL_RANK.*pyxis#73") as caught:
        script("cuda-torchrun", launcher="srun", slurm=slurm)
    assert "Leave gpus_per_task and gpu_bind unset" in str(caught.value)
    free = script("cuda-torchrun", launcher="srun", slurm=Slurm(cpus_per_task=8, gpu_bind="none"))
    assert "#SBATCH --ntasks-per-node=8\n" in free


def test_cpus_per_node_is_shared_by_a_nodes_tasks() -> None:
    """The preset's cpus_per_node (64) is its one task's under torchrun, and each of the 8
    ranks' tasks gets an eighth under srun: 64 CPUs per node either way, never 512."""
    torchrun = script("cuda-torchrun")
    assert "#SBATCH --cpus-per-task=64\n" in torchrun
    assert "srun --ntasks-per-node=1 --cpus-per-task=64 " in torchrun
    srun = script("cuda-torchrun", launcher="srun")
    assert "#SBATCH --ntasks-per-node=8\n" in srun
    assert "#SBATCH --cpus-per-task=8\n" in srun
    assert "srun --ntasks-per-node=8 --cpus-per-task=8 " in srun
    with pytest.raises(SpecError, match=r"cpus_per_node: 60 CPUs do not split evenly.*of 8"):
        script("cuda-torchrun", launcher="srun", slurm=Slurm(cpus_per_node=60))
    with pytest.raises(SpecError, match=r"cpus_per_task: set cpus_per_node .* not both"):
        script("cuda-torchrun", slurm=Slurm(cpus_per_node=64, cpus_per_task=8))


def test_cli(tmp_path: Path) -> None:
    target = tmp_path / "job.sbatch"
    result = CliRunner().invoke(app, ["slurm", "--preset", "cuda-torchrun", "-o", str(target)])
    assert result.exit_code == 0, result.stderr
    assert target.read_text().startswith("#!/bin/bash\n#SBATCH --job-name=cuda-torchrun\n")


def test_a_mount_path_with_a_colon_is_refused_in_every_runtime() -> None:
    """The batch task's binds come from the plan's runtimes, with their check."""
    from dataclasses import replace

    from builder.errors import UsageError
    from builder.spec.records import Mount

    spec = load_preset("cuda-torchrun").spec
    slurm = replace(spec.launch.section(Slurm), docker=True)
    mounts = (Mount("/data:x", "/data"),)
    spec = replace(spec, launch=replace(spec.launch, mounts=mounts).with_section(slurm))
    for runtime in ("docker", "apptainer", "singularity"):
        with pytest.raises(UsageError, match="holds ':'"):
            sbatch_script(
                resolve(Stack(spec, "s", None), runtime_name=runtime, scheduler_name="slurm"),
                image="t:1",
                cluster_dir="/c",
            )


HOSTILE = [
    "gpu\n#SBATCH --uid=0",
    "gpu\nrm -rf ~",
    "gpu\r\n#SBATCH --uid=0",
    "gpu\0",
    "gpu --uid=0",
    "-x",
    "--uid=0",
    "gpu;id",
    "$(id)",
    "gpu`id`",
    "gpu'",
    'gpu"',
    "gpu#x",
    "",
]


@pytest.mark.parametrize("value", [v for v in HOSTILE if v])
@pytest.mark.parametrize("field", ["partition", "account", "time"])
def test_hostile_header_values_are_spec_errors(field: str, value: str) -> None:
    with pytest.raises(SpecError) as info:
        script(slurm=Slurm(**{field: value}))  # type: ignore[arg-type]
    message = str(info.value)
    assert f"launch.slurm.{field}" in message
    assert repr(value) in message
    assert info.value.exit_code == 1


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("--comment", "a\n#SBATCH --uid=0"),
        ("--comment", "a --uid=0"),
        ("--mail-user", "-x"),
        ("--uid\n#SBATCH --gid", ""),
        ("--Exclusive", ""),
        ("---uid", "0"),
        ("--comment", "a'b"),
        ("-A", "x"),
        ("comment", "x"),
        ("--exclusive", ""),
        ("--ntasks-per-node", "8"),
        ("--output", "x.out"),
        ("--mem", "0"),
    ],
)
def test_hostile_extra_options_are_spec_errors(key: str, value: str) -> None:
    item = f"{key}={value}" if value else key
    with pytest.raises(SpecError, match=r"launch\.slurm\.extra\[0\]"):
        script(slurm=Slurm(extra=(item,)))


@pytest.mark.parametrize(
    "time",
    ["30", "30:00", "02:00:00", "1-0", "1-12", "1-12:30", "1-12:30:00", "UNLIMITED", "INFINITE"],
)
def test_every_slurm_time_format_is_accepted(time: str) -> None:
    assert f"#SBATCH --time={time}\n" in script(slurm=Slurm(time=time))


@pytest.mark.parametrize("time", ["1:2:3:4", "1-2-3", "2h", "1.5", "1-", ":30", "soon"])
def test_other_times_say_which_formats_slurm_takes(time: str) -> None:
    with pytest.raises(SpecError, match="MM, MM:SS, HH:MM:SS, D-HH"):
        script(slurm=Slurm(time=time))


def test_usual_values_pass() -> None:
    text = script(
        slurm=Slurm(
            partition="gpu,gpu-long",
            account="proj.ml_team-1",
            mem="0",
            extra=(
                "--constraint=a100&ib",
                "--exclude=node[01-03]",
                "--mail-user=me@example.org",
                "--hint=nomultithread",
            ),
        )
    )
    for line in (
        "--partition=gpu,gpu-long",
        "--account=proj.ml_team-1",
        "--constraint=a100&ib",
        "--exclude=node[01-03]",
        "--mail-user=me@example.org",
    ):
        assert f"#SBATCH {line}\n" in text


def test_a_hostile_value_in_the_cli_exits_1_and_writes_nothing(tmp_path: Path) -> None:
    spec = tmp_path / "stack.yaml"
    text = preset_text("cuda-torchrun")
    spec.write_text(text + '    partition: "gpu\\n#SBATCH --uid=0"\n')  # under its slurm:
    target = tmp_path / "job.sbatch"
    result = CliRunner().invoke(app, ["slurm", str(spec), "-o", str(target)])
    assert result.exit_code == 1, result.output
    assert "launch.slurm.partition" in result.output
    assert not target.exists()


def test_every_shell_value_is_quoted_in_one_place() -> None:
    """Export values, the port and the command's arguments all go through shell_word."""
    from builder.launch.launchers import FromShell
    from builder.schedulers.slurm.script import shell_line, shell_word

    assert shell_word("a b") == "'a b'"
    assert shell_word(FromShell('"$X"')) == '"$X"'
    assert shell_line(["x", "$(id)"]) == "x '$(id)'"
    text = script(args=("$(id)", "a;b"))
    assert "'$(id)' 'a;b'" in text


def test_docker_under_srun_is_refused_with_the_reason() -> None:
    spec = load_preset("cuda-torchrun").spec
    with pytest.raises(UsageError, match=r"outside the job's cgroup.*survives scancel"):
        sbatch_script(
            resolve(Stack(spec, "s", None), runtime_name="docker", scheduler_name="slurm"),
            image="t:1",
            cluster_dir="/c",
        )
    with pytest.raises(UsageError, match=r"--runtime apptainer"):
        sbatch_script(
            resolve(Stack(with_slurm(spec, runtime="docker"), "s", None), scheduler_name="slurm"),
            image="t:1",
            cluster_dir="/c",
        )


def test_the_spec_runtime_docker_is_not_the_batch_runtime() -> None:
    text = sbatch_script(
        resolve(Stack(load_preset("cuda-torchrun").spec, "s", None), scheduler_name="slurm"),
        image="t:1",
        cluster_dir="/c",
    )
    assert " -- apptainer exec --cleanenv --nv " in text


def test_cpus_per_task_is_required_and_reaches_the_step() -> None:
    spec = load_preset("cuda-torchrun").spec
    text = sbatch_script(
        resolve(Stack(spec, "s", None), scheduler_name="slurm"), image="t:1", cluster_dir="/c"
    )
    assert "#SBATCH --cpus-per-task=64\n" in text
    assert "srun --ntasks-per-node=1 --cpus-per-task=64 --kill-on-bad-exit=1" in text
    with pytest.raises(SpecError, match=r"launch.slurm.cpus_per_node.*its 8 rank"):
        sbatch_script(
            resolve(Stack(with_slurm(spec, cpus_per_node=None), "s", None), scheduler_name="slurm"),
            image="t:1",
            cluster_dir="/c",
        )


def test_gaudi_cards_are_the_gres_habana_documents() -> None:
    text = sbatch_script(
        resolve(
            Stack(load_preset("gaudi-deepspeed").spec, "s", None),
            launcher_name="torchrun",
            scheduler_name="slurm",
        ),
        image="t:1",
        cluster_dir="/c",
    )
    options = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --gres=gpu:8" in options
    assert not any("gpus-per-node" in line for line in options)


def test_each_node_checks_its_paths_before_the_launcher(tmp_path: Path) -> None:
    """The srun step's first words: the check, naming the node, then the runtime."""
    code = tmp_path / "code"
    code.mkdir()
    text = script(runtime="none", code=str(code), cache=str(tmp_path / "cache"))
    line = command_line(text)
    assert "/etc/builder/cluster" not in text  # torchrun binds no cluster folder
    check, _, rest = line.rpartition(" -- ")
    assert rest.startswith(f'sh -c \'cd "$0" && exec "$@"\' {code} sh -c \'node=$(hostname);')
    run = subprocess.run(
        ["bash", "-c", f"{check} -- echo started"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 1
    assert f"{tmp_path / 'cache'} is missing on {socket.gethostname()}" in run.stderr
    (tmp_path / "cache").mkdir()
    run = subprocess.run(
        ["bash", "-c", f"{check} -- echo started"], capture_output=True, text=True, check=False
    )
    assert f"{code}/train.py is missing" in run.stderr
    (code / "train.py").write_text("")
    run = subprocess.run(
        ["bash", "-c", f"{check} -- echo started"], capture_output=True, text=True, check=True
    )
    assert run.stdout == "started\n"


@pytest.mark.parametrize("folder", ["/shared/a$b", "/shared/a'b", '/shared/a"b', "/shared/a b"])
def test_a_cluster_folder_of_shell_characters_stays_literal(folder: str, tmp_path: Path) -> None:
    """The logs folder and the job's hostfile are written under it: quoted, shellcheck-clean."""
    spec = load_preset("cpu-deepspeed").spec
    path = tmp_path / "job.sbatch"
    path.write_text(
        sbatch_script(
            resolve(spec, runtime_name="none", scheduler_name="slurm"),
            image="i:1",
            cluster_dir=folder,
        )
    )
    subprocess.run([real_tool("shellcheck"), str(path)], check=True)
    logs = next(line for line in path.read_text().splitlines() if line.startswith("LOGS="))
    probe = f'SLURM_JOB_ID=7; {logs}; printf %s "$LOGS"'
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout == f"{folder}/logs/7"


def test_requeue_signals_the_batch_shell_which_requeues_and_waits_for_its_step(
    tmp_path: Path,
) -> None:
    """launch.slurm.requeue: --requeue and --signal=B:USR1@N; on USR1 the batch shell (real
    bash, stand-ins for srun and scontrol) calls `scontrol requeue` while srun runs, then
    waits for srun again and exits with srun's status. shellcheck-clean."""
    spec = load_preset("cpu-deepspeed").spec
    spec = with_slurm(spec, cpus_per_node=2, requeue=120)
    text = sbatch_script(
        resolve(Stack(spec, "s", None), runtime_name="none", scheduler_name="slurm"),
        image="team/t:1",
        cluster_dir=str(tmp_path / "c"),
    )
    assert "#SBATCH --requeue\n#SBATCH --signal=B:USR1@120\n#SBATCH --open-mode=append\n" in text
    assert '--output="$LOGS/%N.out" --open-mode=append' in text  # the first run's lines stay
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    subprocess.run([real_tool("shellcheck"), str(path)], check=True)
    stand_ins = tmp_path / "bin"
    stand_ins.mkdir()
    for name, body in (
        ("srun", 'sleep 2; echo srun-done >> "$CALLS"; exit 3'),
        ("scontrol", 'if [ "$1" = show ]; then echo n1; else echo "scontrol $*" >> "$CALLS"; fi'),
    ):
        (stand_ins / name).write_text(f"#!/bin/sh\n{body}\n")
        (stand_ins / name).chmod(0o755)
    calls = tmp_path / "calls"
    env = {
        "PATH": f"{stand_ins}:/usr/bin:/bin",
        "CALLS": str(calls),
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_NODELIST": "n1",
    }
    job = subprocess.Popen(["bash", str(path)], env=env, stdout=subprocess.PIPE, text=True)
    time.sleep(0.8)
    job.send_signal(signal.SIGUSR1)
    output, _ = job.communicate(timeout=30)
    assert calls.read_text().splitlines() == ["scontrol requeue 7", "srun-done"]
    assert job.returncode == 3  # srun's own status, once it ended
    assert "job 7: run 0 (requeued that many times)" in output


@pytest.mark.parametrize(
    ("logs", "cluster_dir"),
    [
        ("/shared/lo\\gs", "/shared/c"),
        ("/shared/100%/logs", "/shared/c"),
        ("/shared/%N", "/shared/c"),
        (None, "/shared/c\\d"),
        (None, "/shared/50%"),
    ],
)
def test_a_path_that_changes_sruns_filename_patterns_is_refused(
    logs: str | None, cluster_dir: str
) -> None:
    """srun's --output reads the whole log path as a filename pattern: a '%' is one, and
    a backslash turns every one off (man srun: "\\ Do not process any of the replacement
    symbols"), so that every node would write the one literal %N.out."""
    spec = load_preset("cpu-deepspeed").spec
    spec = with_slurm(replace(spec, launch=replace(spec.launch, logs=logs)), cpus_per_node=2)
    with pytest.raises(UsageError) as caught:
        sbatch_script(
            resolve(Stack(spec, "s", None), scheduler_name="slurm"),
            image="team/t:1",
            cluster_dir=cluster_dir,
        )
    assert "filename pattern" in str(caught.value)
    assert caught.value.field == ("launch.logs" if logs else "--cluster-dir")


OWNED_SPELLINGS = [
    ("--tasks-per-node=4", "ntasks-per-node"),  # sbatch's alias
    ("--tasks=4", "ntasks-per-node"),  # a start of the alias
    ("--ntasks-per-n=4", "ntasks-per-node"),  # getopt's unique start
    ("--outp=x.out", "output"),
    ("--err=x.err", "error"),
    ("--cpus-per-t=2", "cpus-per-task"),
    ("--job=other", "job-name"),
    ("--part=debug", "partition"),
    ("--acc=x", "account"),
    ("--no-req", "no-requeue"),
    ("--wr=true", "wrap"),
    ("--sig=USR1@60", "signal"),
    ("--gpus-per-t=1", "gpus-per-task"),
    ("--nod=2", "nodes"),  # ambiguous to sbatch too: refused either way
]


@pytest.mark.parametrize(("item", "owner"), OWNED_SPELLINGS)
def test_an_option_builder_writes_is_refused_however_sbatch_spells_it(
    item: str, owner: str
) -> None:
    """sbatch's getopt_long takes an alias and any unique start of a long option (sbatch
    22.05.8: --tasks-per-node=2 and --ntasks-per-n=2 are accepted, --nod is ambiguous):
    each is the option builder writes, and would win over it."""
    with pytest.raises(SpecError, match=r"launch\.slurm\.extra\[0\]") as caught:
        script(slurm=Slurm(extra=(item,)))
    assert f"--{owner}" in str(caught.value) or "builder writes itself" in str(caught.value)


@pytest.mark.parametrize(
    "item",
    [
        "--exclude=node3",
        "--nodelist=node[1-2]",
        "--mem-per-cpu=4G",
        "--time-min=10",
        "--gres-flags=enforce-binding",
        "--ntasks-per-core=1",
        "--cpus-per-gpu=8",
        "--mail-type=END",
        "--constraint=a100",
    ],
)
def test_other_options_that_share_a_start_with_builders_pass(item: str) -> None:
    assert f"#SBATCH {item}\n" in script(slurm=Slurm(extra=(item,), cpus_per_task=8))


@pytest.mark.parametrize("item", ["--mem-per-cpu=4G", "--mem-per-gpu=40G", "--mem-per-c=4G"])
def test_memory_asked_two_ways_is_refused(item: str) -> None:
    """sbatch refuses --mem beside --mem-per-cpu or --mem-per-gpu (mutually exclusive)."""
    with pytest.raises(SpecError, match="refuses the two together"):
        script(slurm=Slurm(extra=(item,), mem="500G", cpus_per_task=8))


def test_one_task_per_rank_labels_each_line_with_its_rank() -> None:
    """With launcher srun a node's log holds all its ranks' lines: --label says whose."""
    ranks = script("cuda-torchrun", launcher="srun", slurm=Slurm(cpus_per_task=8))
    assert " --kill-on-bad-exit=1 --label \\\n" in ranks
    node = script("cuda-torchrun", slurm=Slurm(cpus_per_task=8))
    assert "--label" not in node  # one task per node: the node's log is its own

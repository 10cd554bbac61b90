"""Run and launch commands (the real parsers that read them are in tests/conformance)."""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest
from typer.testing import CliRunner

from builder import platforms
from builder.cli import app
from builder.errors import SpecError, UsageError
from builder.fabrics import FABRICS
from builder.launch.actions import ContainerExec, ContainerStart, HostCommand, run_options
from builder.launch.launchers.torchrun import LOGGED
from builder.launch.plan import launch_plan, supported
from builder.resolved import resolve
from builder.schedulers.slurm.script import sbatch_script
from builder.spec.check import check_spec
from builder.spec.loader import Stack, load_preset, spec_from_dict
from builder.spec.presets import preset_names
from builder.spec.records import Mount, Spec

if TYPE_CHECKING:
    from pathlib import Path


def start_argv(spec: Spec, *, cluster_dir: str = "/c") -> list[str]:
    """The `docker run` that starts the first node's container."""
    plan = launch_plan(resolve(spec), image="i:1", cluster_dir=cluster_dir)
    return list(plan.of_role("start")[0].argv)


def flags(preset: str, *, fabric: str = "none") -> list[str]:
    spec = load_preset(preset).spec
    return start_argv(replace(spec, image=replace(spec.image, fabric=fabric)))


def test_cuda_gets_gpus_host_ipc_and_ulimits() -> None:
    argv = flags("cuda-deepspeed")
    joined = " ".join(argv)
    assert "--gpus all --ipc host --ulimit memlock=-1 --ulimit stack=67108864" in joined
    assert "--network host" in joined
    assert "--volume /c:/etc/builder/cluster:ro" in joined
    assert argv[-1] == "i:1"
    for fabric in ("infiniband", "roce"):
        assert "--device /dev/infiniband --cap-add IPC_LOCK --ulimit memlock=-1" in " ".join(
            flags("cuda-deepspeed", fabric=fabric)
        )


def test_gaudi_gets_the_habana_runtime() -> None:
    joined = " ".join(flags("gaudi-deepspeed"))
    assert "--runtime habana -e HABANA_VISIBLE_DEVICES=all" in joined
    assert (
        "-e OMPI_MCA_btl_vader_single_copy_mechanism=none --cap-add sys_nice --ipc host" in joined
    )


def test_env_and_mounts_reach_docker_as_single_arguments() -> None:
    spec = load_preset("cpu-deepspeed").spec
    spec = replace(
        spec,
        launch=replace(
            spec.launch,
            env={"A": "x y $z"},
            mounts=(Mount("/data sets", "/data", read_only=True), Mount("/scratch", "/scratch")),
        ),
    )
    argv = start_argv(spec)
    assert argv[argv.index("A=x y $z") - 1] == "--env"
    assert "/data sets:/data:ro" in argv
    assert "/scratch:/scratch" in argv
    bad = replace(spec, launch=replace(spec.launch, mounts=(Mount("/a:b", "/x"),)))
    with pytest.raises(UsageError, match="holds ':'"):
        start_argv(bad)
    with pytest.raises(UsageError, match="holds ':'"):
        start_argv(spec, cluster_dir="/c:d")


def test_the_plan_is_typed_data_per_node_and_role() -> None:
    plan = launch_plan(resolve(load_preset("cpu-deepspeed").spec), image="i:1", cluster_dir="/c")
    assert [(s.node, s.role) for s in plan.steps] == [
        ("node1", "start"),
        ("node2", "start"),
        ("node1", "launch"),
    ]
    start, launcher = plan.steps[0].action, plan.steps[-1].action
    assert isinstance(start, ContainerStart)
    assert start.name == "builder-cpu-deepspeed"
    assert start.network == "host"
    assert start.flags == ("--ipc", "host")
    assert isinstance(launcher, ContainerExec)
    assert launcher.container == start.name
    assert launcher.command[0] == "deepspeed"
    assert dict(launcher.env) == {
        "DS_ENV_FILE": "/etc/builder/cluster/.deepspeed_env",
        "BUILDER_LAUNCH": "builder-cpu-deepspeed",  # what its stop finds it by
    }
    bare = launch_plan(
        resolve(load_preset("cpu-deepspeed").spec, runtime_name="none"), image="i", cluster_dir="/c"
    )
    assert [type(s.action) for s in bare.steps] == [HostCommand]


def test_what_each_runtime_stops_and_how() -> None:
    """docker exec: a second exec that finds the launcher by its marker; a node's docker
    run: docker stop; sshd's containers stay up; apptainer and the bare node get the
    signal itself (in launch.sh's foreground), so they have no stop."""
    spec = load_preset("cpu-deepspeed").spec
    plan = launch_plan(resolve(spec), image="i:1", cluster_dir="/c")
    assert [s.stop for s in plan.of_role("start")] == [None, None]
    (launcher,) = plan.of_role("launch")
    assert isinstance(launcher.stop, ContainerExec)
    assert launcher.stop.container == "builder-cpu-deepspeed"
    assert launcher.stop_argv is not None
    assert launcher.stop_argv[-2:] == ("BUILDER_LAUNCH=builder-cpu-deepspeed", "30")
    assert json.loads(json.dumps(plan.as_data()))["commands"][-1]["stop"][:4] == [
        "docker",
        "exec",
        "builder-cpu-deepspeed",
        "sh",
    ]
    torchrun = launch_plan(resolve(spec, launcher_name="torchrun"), image="i:1", cluster_dir="/c")
    for step in torchrun.steps:
        assert step.stop_argv == ("docker", "stop", "--time", "30", "builder-cpu-deepspeed")
        assert {"--rm", "--sig-proxy=false"} <= set(step.argv)
        assert "--detach" not in step.argv
    for runtime in ("apptainer", "none"):
        other = launch_plan(
            resolve(spec, runtime_name=runtime, launcher_name="torchrun"),
            image="i:1",
            cluster_dir="/c",
        )
        assert [s.stop for s in other.steps] == [None, None]


def test_deepspeed_plan_starts_every_node_then_one_launcher() -> None:
    plan = launch_plan(resolve(load_preset("cpu-deepspeed").spec), image="i:1", cluster_dir="/c")
    assert [c.node for c in plan.steps] == ["node1", "node2", "node1"]
    exec_argv = plan.steps[-1].argv
    assert exec_argv[:4] == (
        "docker",
        "exec",
        "--env",
        "DS_ENV_FILE=/etc/builder/cluster/.deepspeed_env",
    )
    assert plan.master_addr == "node1"


def test_torchrun_plan_runs_the_same_command_everywhere() -> None:
    plan = launch_plan(resolve(load_preset("cuda-torchrun").spec), image="i:1", cluster_dir="/c")
    assert len({c.argv for c in plan.steps}) == 1
    assert len(plan.steps) == 2


def test_runtime_none_runs_the_launchers_on_the_nodes() -> None:
    plan = launch_plan(
        resolve(load_preset("cpu-deepspeed").spec, runtime_name="none"), image="i", cluster_dir="/c"
    )
    (only,) = plan.steps
    assert only.argv[:2] == ("env", "DS_ENV_FILE=/c/.deepspeed_env")
    assert "--hostfile" in only.argv


def test_what_cannot_work_is_an_error() -> None:
    with pytest.raises(UsageError, match="reaches the nodes over ssh"):
        launch_plan(
            resolve(load_preset("cuda-torchrun").spec, launcher_name="deepspeed"),
            image="i",
            cluster_dir="/c",
        )
    with pytest.raises(UsageError, match="not supported yet"):
        launch_plan(
            resolve(load_preset("cpu-deepspeed").spec, runtime_name="apptainer"),
            image="i",
            cluster_dir="/c",
        )


def test_cli_json_is_the_plan() -> None:
    import json

    result = CliRunner().invoke(
        app, ["launch", "--preset", "cpu-deepspeed", "--json", "--cluster-dir", "/c"]
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)["result"]
    assert data["launcher"] == "deepspeed"
    assert data["commands"][0]["argv"][:2] == ["docker", "run"]


def test_sif_from_the_local_daemon_reads_a_bare_name_as_latest() -> None:
    from builder.launch.sif import sif_build_argv

    assert sif_build_argv("team/train:1.0") == [
        "apptainer",
        "build",
        "train-1.0.sif",
        "docker-daemon://team/train:1.0",
    ]
    assert sif_build_argv("localhost:5000/t:2", program="singularity")[0] == "singularity"
    pinned = "localhost:5000/team/t@sha256:" + "ab" * 32
    assert sif_build_argv(pinned) == [
        "apptainer",
        "build",
        "t-abababababab.sif",
        f"docker://{pinned}",
    ]
    with pytest.raises(UsageError, match="sha256"):
        sif_build_argv("team/t@sha256:123")
    # the file a pinned plan runs is the file `builder sif` builds
    from builder.launch.sif import sif_name

    assert sif_name(pinned) == "t-abababababab.sif"
    plan = launch_plan(
        resolve(load_preset("cuda-torchrun").spec, runtime_name="apptainer"),
        image=pinned,
        cluster_dir="/c",
    )
    assert "t-abababababab.sif" in plan.steps[0].argv
    for bad in ("a/:1", "a/@sha256:" + "a" * 64, "team/X:1", "-x:1", "img@sha256:" + "A" * 64):
        with pytest.raises(UsageError):
            sif_build_argv(bad)
    # docker's reading: no tag is :latest, and a capital makes the first part a registry
    assert sif_build_argv("localhost:5000/t") == [
        "apptainer",
        "build",
        "t-latest.sif",
        "docker-daemon://localhost:5000/t:latest",
    ]
    assert sif_build_argv("team/train")[3] == "docker-daemon://team/train:latest"
    assert sif_build_argv("Team/x:1")[3] == "docker-daemon://Team/x:1"


def test_apptainer_torchrun_carries_env_through_cleanenv() -> None:
    spec = load_preset("cuda-torchrun").spec
    plan = launch_plan(resolve(spec, runtime_name="apptainer"), image="team/t:1", cluster_dir="/c")
    argv = list(plan.steps[0].argv)
    assert argv[0] == "env"
    assert "APPTAINERENV_NCCL_DEBUG=WARN" in argv
    run = argv[argv.index("apptainer") :]
    assert run[:4] == ["apptainer", "exec", "--cleanenv", "--nv"]
    # torchrun reads nothing of the cluster folder: the code at the workdir, the cache
    binds = [run[i + 1] for i, word in enumerate(run) if word == "--bind"]
    assert binds == ["/shared/project:/workspace", "/shared/cache:/shared/cache"]
    assert run[run.index("--pwd") + 1] == "/workspace"
    assert "APPTAINERENV_HF_HOME=/shared/cache/huggingface" in argv
    assert run[run.index("torchrun") - 1] == "t-1.sif"
    singularity = launch_plan(
        resolve(spec, runtime_name="singularity"), image="team/t:1", cluster_dir="/c"
    )
    assert "SINGULARITYENV_NCCL_DEBUG=WARN" in singularity.steps[0].argv


def test_a_shared_sif_is_named_in_the_plan_the_checks_and_the_batch_script() -> None:
    spec = load_preset("cuda-torchrun").spec
    spec = replace(spec, launch=replace(spec.launch, sif="/shared/images/t-1.sif"))
    plan = launch_plan(resolve(spec, runtime_name="apptainer"), image="team/t:1", cluster_dir="/c")
    argv = list(plan.steps[0].argv)
    assert argv[argv.index("torchrun") - 1] == "/shared/images/t-1.sif"
    assert "/shared/images/t-1.sif" in plan.host_paths  # launch.sh checks every node has it
    script = sbatch_script(
        resolve(Stack(spec, "stack.yaml", None), runtime_name="apptainer", scheduler_name="slurm"),
        image="team/t:1",
        cluster_dir="/c",
    )
    assert "(/shared/images/t-1.sif)" in script
    check = next(
        line
        for line in script.splitlines()
        if "/shared/images/t-1.sif" in line and not line.startswith("#")
    )
    assert "torchrun" in check
    docker = launch_plan(resolve(spec, runtime_name="docker"), image="team/t:1", cluster_dir="/c")
    assert "/shared/images/t-1.sif" not in docker.host_paths  # only Apptainer reads it


def test_mpirun_plan_needs_openmpi_and_ssh() -> None:
    spec = load_preset("cpu-deepspeed").spec
    with pytest.raises(UsageError, match="needs OpenMPI in the image"):
        launch_plan(resolve(spec, launcher_name="mpirun"), image="i", cluster_dir="/c")
    spec = replace(spec, image=replace(spec.image, openmpi=True))
    plan = launch_plan(resolve(spec, launcher_name="mpirun"), image="i", cluster_dir="/c")
    argv = plan.steps[-1].argv
    assert argv[:5] == (
        "docker",
        "exec",
        "--env",
        "BUILDER_LAUNCH=builder-cpu-deepspeed",
        "--workdir",
    )
    assert "--allow-run-as-root" in argv
    assert argv[argv.index("-np") + 1] == "4"
    assert "MASTER_ADDR=node1" in argv


def test_gaudi_spawn_runs_like_deepspeed_from_the_first_node() -> None:
    spec = load_preset("gaudi-deepspeed").spec
    plan = launch_plan(resolve(spec, launcher_name="gaudi_spawn"), image="i:1", cluster_dir="/c")
    assert [c.node for c in plan.steps] == ["node1", "node2", "node1"]
    argv = plan.steps[-1].argv
    assert argv[2:4] == ("--env", "DS_ENV_FILE=/etc/builder/cluster/.deepspeed_env")
    spawn = argv[argv.index("python") :]
    assert spawn[:3] == ("python", "gaudi_spawn.py", "--world_size")
    assert spawn[3] == str(2 * spec.launch.slots)
    assert spawn[4:6] == ("--hostfile", "/etc/builder/cluster/hostfile")
    assert spawn[6:9] == ("--master_port", str(spec.launch.master_port), "--use_deepspeed")
    with pytest.raises(UsageError, match="gaudi_spawn is for accelerator: gaudi"):
        launch_plan(
            resolve(load_preset("cpu-deepspeed").spec, launcher_name="gaudi_spawn"),
            image="i",
            cluster_dir="/c",
        )


def test_deepspeed_escapes_for_its_pdsh_line_only_on_several_nodes() -> None:
    base = load_preset("cpu-deepspeed").spec
    launch = replace(base.launch, script="my dir/t.py", args=("50%", "a $b", "it's"))
    plan = launch_plan(resolve(replace(base, launch=launch)), image="i", cluster_dir="/c")
    argv = plan.steps[-1].argv
    assert argv[-4:] == ("'my dir/t.py'", "50%%", "a \\$b", "'it'\"'\"'s'")
    one = replace(launch, nodes=("node1",))
    plan = launch_plan(resolve(replace(base, launch=one)), image="i", cluster_dir="/c")
    assert plan.steps[-1].argv[-4:] == ("my dir/t.py", "50%", "a $b", "it's")


def test_code_and_cache_reach_every_runtime() -> None:
    spec = load_preset("cuda-torchrun").spec
    docker = launch_plan(resolve(spec), image="t:1", cluster_dir="/c").steps[0].argv
    volumes = [docker[i + 1] for i, word in enumerate(docker) if word == "--volume"]
    assert volumes == ["/shared/project:/workspace", "/shared/cache:/shared/cache"]
    assert "TORCH_HOME=/shared/cache/torch" in docker
    bare = launch_plan(resolve(spec, runtime_name="none"), image="t:1", cluster_dir="/c")
    argv = list(bare.steps[0].argv)
    assert argv[argv.index("sh") : argv.index("torchrun")] == [
        "sh",
        "-c",
        'cd "$0" && exec "$@"',
        "/shared/project",
    ]
    assert "HF_HOME=/shared/cache/huggingface" in argv
    assert bare.host_paths == ("/shared/project", "/shared/cache", "/shared/project/train.py")


def test_the_cluster_folder_is_bound_only_for_a_launcher_that_reads_it() -> None:
    spec = load_preset("cpu-deepspeed").spec
    deepspeed = launch_plan(resolve(spec), image="t:1", cluster_dir="/c").steps[0].argv
    assert "/c:/etc/builder/cluster:ro" in deepspeed
    torchrun = launch_plan(resolve(spec, launcher_name="torchrun"), image="t:1", cluster_dir="/c")
    assert "/c:/etc/builder/cluster:ro" not in torchrun.steps[0].argv
    assert torchrun.host_paths == ("/shared/project", "/shared/cache", "/shared/project/train.py")


@pytest.mark.parametrize(
    ("script", "on_host"),
    [
        ("train.py", "/shared/project/train.py"),
        ("/workspace/sub/train.py", "/shared/project/sub/train.py"),
        ("/opt/other/train.py", None),
    ],
)
def test_the_script_is_found_in_the_code_folder(script: str, on_host: str | None) -> None:
    spec = load_preset("cuda-torchrun").spec
    spec = replace(spec, launch=replace(spec.launch, script=script))
    plan = launch_plan(resolve(spec), image="t:1", cluster_dir="/c")
    assert plan.host_paths == ("/shared/project", "/shared/cache", *([on_host] if on_host else []))


def test_without_code_and_cache_nothing_is_bound_for_torchrun() -> None:
    spec = load_preset("cuda-torchrun").spec
    spec = replace(spec, launch=replace(spec.launch, code=None, cache=None))
    plan = launch_plan(resolve(spec), image="t:1", cluster_dir="/c")
    assert "--volume" not in plan.steps[0].argv
    assert plan.host_paths == ()
    assert "HF_HOME" not in " ".join(plan.steps[0].argv)


@pytest.mark.parametrize(
    ("code", "refused"),
    [
        ("/x;touch /tmp/PWNED;cd /tmp", True),
        ("/shared/my project", True),
        ("/a$b", True),
        ("/shared/code-1.2_x+y@z", False),
    ],
)
def test_the_folder_deepspeed_pastes_is_checked(code: str, refused: bool) -> None:
    """DeepSpeed's pdsh runner pastes the launcher's folder (`cd FOLDER;`) unquoted."""
    spec = load_preset("cpu-deepspeed").spec
    spec = replace(spec, launch=replace(spec.launch, code=code))
    resolved = resolve(spec, runtime_name="none")
    if refused:
        with pytest.raises(UsageError, match=r"launch\.code"):
            launch_plan(resolved, image="i:1", cluster_dir="/c")
    else:
        launch_plan(resolved, image="i:1", cluster_dir="/c")
    # torchrun pastes nothing: the same folder is fine for it
    torchrun = replace(spec, launch=replace(spec.launch, launcher="torchrun"))
    launch_plan(resolve(torchrun, runtime_name="none"), image="i:1", cluster_dir="/c")


def test_without_code_a_bare_launcher_checks_its_folder_where_it_starts(tmp_path: Path) -> None:
    """Runtime none without launch.code: the folder is the shell's, so the launch step
    checks it there (a real sh) before DeepSpeed would paste it."""
    spec = load_preset("cpu-deepspeed").spec
    spec = replace(spec, launch=replace(spec.launch, code=None))
    plan = launch_plan(resolve(spec, runtime_name="none"), image="i:1", cluster_dir="/c")
    action = plan.steps[-1].action
    assert isinstance(action, HostCommand)
    probe = replace(action, command=("pwd",), env=())
    for name, ok in (("plain-dir_1.2", True), ("my dir", False), ("a;b", False)):
        folder = tmp_path / name
        folder.mkdir()
        done = subprocess.run(probe.argv(), cwd=folder, capture_output=True, text=True, check=False)
        assert (done.returncode == 0) == ok, done.stderr
        assert ok or "launch.code" in done.stderr


def test_a_restart_policy_reaches_every_scheduler_with_its_workaround() -> None:
    """torchrun restarts its ranks; across nodes torch's shared rendezvous store breaks
    the restart (pytorch/pytorch#135712), so the ranks get the opt-out."""
    spec = load_preset("cpu-deepspeed").spec
    launch = replace(spec.launch, launcher="torchrun", restarts=2, min_nodes=1)
    spec = replace(spec, launch=launch)
    plan = launch_plan(resolve(spec), image="i:1", cluster_dir="/c")
    argv = plan.steps[0].argv
    assert argv[argv.index("--max-restarts") + 1] == "2"
    assert argv[argv.index("--nnodes") + 1] == "1:2"
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in argv
    slurm = sbatch_script(resolve(spec, scheduler_name="slurm"), image="i:1", cluster_dir="/c")
    assert "export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in slurm
    assert '--nnodes 1:"$SLURM_NNODES"' in slurm
    assert "--max-restarts 2" in slurm
    # no policy, no variable
    plain = resolve(load_preset("cpu-deepspeed").spec, launcher_name="torchrun")
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in plain.run_environment()


@pytest.mark.parametrize("launcher", ["deepspeed", "srun"])
def test_launchers_without_restarts_refuse_a_policy(launcher: str) -> None:
    spec = load_preset("cpu-deepspeed").spec
    spec = replace(spec, launch=replace(spec.launch, launcher=launcher, restarts=1))
    problems = dict(check_spec(spec))
    assert "launcher torchrun" in problems["launch.restarts"]


def with_launch(**launch: object) -> Spec:
    spec = load_preset("cpu-deepspeed").spec
    return replace(spec, launch=replace(spec.launch, **launch))  # type: ignore[arg-type]


def test_shared_logs_and_checkpoints_reach_every_scheduler_at_their_own_path() -> None:
    """launch.logs and launch.checkpoints: bound at their own path on every node; torchrun
    writes each node's rank logs and error file into launch.logs (launch.sh and the
    batch script alike), and every rank finds the checkpoints in BUILDER_CHECKPOINTS."""
    spec = with_launch(launcher="torchrun", logs="/shared/logs", checkpoints="/shared/ckpt")
    argv = launch_plan(resolve(spec), image="i:1", cluster_dir="/c").steps[0].argv
    for folder in ("/shared/logs", "/shared/ckpt"):
        assert f"{folder}:{folder}" in argv
    assert "BUILDER_CHECKPOINTS=/shared/ckpt" in argv
    at = argv.index("-c")
    assert argv[at + 1] == LOGGED
    assert argv[at + 2] == "/shared/logs"  # $0 of LOGGED: where ranks-NODE/ and error-NODE.json go
    assert argv[at + 3 : at + 5] == ("--nnodes", "2")
    slurm = sbatch_script(resolve(spec, scheduler_name="slurm"), image="i:1", cluster_dir="/c")
    assert 'LOGS=/shared/logs/"$SLURM_JOB_ID"' in slurm  # not the cluster folder's logs/
    assert slurm.count("--bind /shared/logs:/shared/logs") == 1  # one bind, not two


def test_torchruns_logged_command_runs_as_the_shell_reads_it(tmp_path: Path) -> None:
    """LOGGED through a real sh, with a stand-in torchrun: the error file is per node and
    removed before the run, the console prefix asks torch for the global rank."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "torchrun"
    fake.write_text(
        '#!/bin/sh\necho "$TORCHELASTIC_ERROR_FILE|$TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE|$*"\n'
    )
    fake.chmod(0o755)
    node = subprocess.run(["hostname"], capture_output=True, text=True, check=True).stdout.strip()
    stale = tmp_path / f"error-{node}.json"
    stale.write_text("{}")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    ran = subprocess.run(
        ["sh", "-c", LOGGED, str(tmp_path), "--nnodes", "2", "train.py"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert ran.stdout.strip() == (
        f"{stale}|[rank${{rank}}]:|--log-dir {tmp_path}/ranks-{node} --tee 3 --nnodes 2 train.py"
    )
    assert not stale.exists()


def test_deepspeed_writes_each_ranks_log_where_launch_logs_says() -> None:
    spec = with_launch(logs="/shared/logs")
    plan = launch_plan(resolve(spec), image="i:1", cluster_dir="/c")
    launch = next(step for step in plan.steps if step.role == "launch")
    assert "--enable_each_rank_log=/shared/logs/ranks" in launch.argv
    slurm = sbatch_script(resolve(spec, scheduler_name="slurm"), image="i:1", cluster_dir="/c")
    assert '--enable_each_rank_log="$LOGS"/ranks train.py' in slurm
    plain = sbatch_script(
        resolve(load_preset("cpu-deepspeed").spec, scheduler_name="slurm"),
        image="i:1",
        cluster_dir="/c",
    )
    assert "--enable_each_rank_log" not in plain  # the node logs hold the ranks' output


@pytest.mark.parametrize(
    ("preset", "launcher"), [("cpu-deepspeed", "mpirun"), ("gaudi-deepspeed", "gaudi_spawn")]
)
def test_launchers_without_rank_logs_refuse_launch_logs(preset: str, launcher: str) -> None:
    spec = load_preset(preset).spec
    spec = replace(spec, launch=replace(spec.launch, launcher=launcher, logs="/shared/logs"))
    problems = dict(check_spec(spec))
    assert "no way to write each rank's output" in problems["launch.logs"]


@pytest.mark.parametrize("field", ["logs", "checkpoints"])
@pytest.mark.parametrize("path", ["/tmp/run", "/var/tmp", "/dev/shm/x", "/run/user/0"])
def test_node_local_folders_are_refused_for_logs_and_checkpoints(field: str, path: str) -> None:
    image = {"accelerator": "cpu", "torch": "2.13.0"}
    data: dict[str, Any] = {"version": 1, "name": "x", "image": image, "launch": {field: path}}
    with pytest.raises(SpecError) as caught:
        spec_from_dict(data)
    assert f"launch.{field}" in str(caught.value)
    assert "every node has of its own" in str(caught.value)


def test_a_logs_folder_with_percent_is_refused_under_slurm() -> None:
    spec = with_launch(launcher="torchrun", logs="/shared/100%")
    with pytest.raises(UsageError, match=r"launch.logs '/shared/100%'.*srun's --output"):
        sbatch_script(resolve(spec, scheduler_name="slurm"), image="i:1", cluster_dir="/c")


def _options(argv: list[str]) -> list[tuple[str, str | None]]:
    """A docker run line's options as (name, value) pairs, up to the image."""
    pairs: list[tuple[str, str | None]] = []
    words = iter(argv[2:])
    for word in words:
        if not word.startswith("-"):
            break  # the image
        if "=" in word and word.startswith("--"):
            pairs.append((word.split("=")[0], word.split("=", 1)[1]))
        elif word in ("--detach", "--rm", "--privileged", "--init"):
            pairs.append((word, None))
        else:
            pairs.append((word, next(words)))
    return pairs


def _every_combination() -> list[tuple[str, str, str, str]]:
    return [
        (preset, fabric, runtime, launcher)
        for preset in preset_names()
        for fabric, one in FABRICS.items()
        if platforms.get(load_preset(preset).spec.image.accelerator).collective.runs_over(one)
        for runtime, launcher in supported()
    ]


def test_no_docker_run_option_is_given_twice_on_any_platform_fabric_or_runtime() -> None:
    """The platform's flags, the fabric's and the plan's own meet in one run line: none
    twice (CUDA and InfiniBand both ask for --ulimit memlock=-1), no limit, variable or
    bind target set twice."""
    checked = set()
    for preset, fabric, runtime, launcher in _every_combination():
        spec = load_preset(preset).spec
        spec = replace(spec, image=replace(spec.image, fabric=fabric))
        try:
            resolved = resolve(spec, runtime_name=runtime, launcher_name=launcher)
            plan = launch_plan(resolved, image="team/train:1", cluster_dir="/c")
        except (SpecError, UsageError):
            continue  # a launcher the preset's image or platform does not run
        for step in plan.steps:
            argv = list(step.argv)
            if argv[:2] != ["docker", "run"]:
                continue
            pairs = _options(argv)
            keyed = [
                (name, (value or "").split("=")[0])
                for name, value in pairs
                if name in ("--ulimit", "--env", "-e", "--label")
            ]
            where = f"{preset} {fabric} {runtime} {launcher}"
            assert len(set(pairs)) == len(pairs), f"{where}: {shlex.join(argv)}"
            assert len(set(keyed)) == len(keyed), f"{where}: {shlex.join(argv)}"
            checked.add((preset, fabric, runtime))
    assert ("cuda-deepspeed", "infiniband", "docker") in checked
    assert ("rocm-deepspeed", "roce", "docker") in checked
    assert {runtime for _, _, runtime in checked} == {"docker"}  # the others run no docker


def test_run_options_keep_the_later_of_two_that_set_the_same_thing() -> None:
    tokens = [
        "--ulimit",
        "memlock=-1",
        "--ipc",
        "host",
        "-e",
        "A=1",
        "--cap-add",
        "IPC_LOCK",
        "--sig-proxy=false",
        "--device",
        "/dev/infiniband",
        "--ulimit",
        "memlock=-1",
        "--cap-add",
        "SYS_NICE",
        "--env",
        "A=2",
        "--device",
        "/dev/infiniband",
        "--volume",
        "/a:/t:ro",
        "--volume",
        "/b:/t",
        "--ipc",
        "private",
        "--rm",
        "--cap-add",
        "IPC_LOCK",
    ]
    assert run_options(tokens) == [
        "--sig-proxy=false",
        "--ulimit",
        "memlock=-1",
        "--cap-add",
        "SYS_NICE",
        "--env",
        "A=2",
        "--device",
        "/dev/infiniband",
        "--volume",
        "/b:/t",
        "--ipc",
        "private",
        "--rm",
        "--cap-add",
        "IPC_LOCK",
    ]


def test_launch_prints_one_line_per_command_and_one_on_how_to_stop() -> None:
    result = CliRunner().invoke(app, ["launch", "--preset", "cuda-deepspeed"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "node1, start the node's container (sshd)",
        "node2, start the node's container (sshd)",
        "node1, once every node is up, the launcher (pdsh reaches the rest)",
        "to stop",
    ]
    assert "sh launch.sh stop" in lines[-1]
    assert "/proc/" not in result.stdout  # the stop script is in the bundle and --json
    data = json.loads(
        CliRunner().invoke(app, ["launch", "--preset", "cuda-deepspeed", "--json"]).stdout
    )
    assert any("/proc/" in " ".join(c["stop"] or []) for c in data["result"]["commands"])
    torchrun = CliRunner().invoke(app, ["launch", "--preset", "cuda-torchrun"]).stdout
    assert torchrun.splitlines()[-1].startswith(
        "to stop: `docker stop --time 30 builder-cuda-torchrun` on node1, node2"
    )

"""Runtime pyxis: the batch script's srun options as pyxis v0.24.0 reads them, and the
image references as enroot v4.1.2 and v3.5.0 read them.

Neither pyxis (a SPANK plugin of slurmd) nor enroot is installed here, so their rules
are replayed: ``pyxis_options`` follows args.c at v0.24.0 (how each --container-*
option's value is split and checked), ``ENROOT_V4``/``ENROOT_V3`` are the image
reference regexes of src/docker.sh, run by bash itself. The script's srun line is read
by running the script in bash with srun and scontrol as stubs, so the words checked
are the ones srun would get.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.errors import UsageError
from builder.launch.actions import HostCommand
from builder.launch.launchers.base import LauncherCommand
from builder.launch.plan import setup_of
from builder.launch.runtimes import pyxis
from builder.launch.secrets import secret_files
from builder.launch.squashfs import enroot_image, squashfs_import_argv, squashfs_problem
from builder.resolved import resolve
from builder.schedulers.slurm.script import sbatch_script
from builder.schedulers.slurm.section import Slurm
from builder.spec.loader import Stack, load_preset
from builder.spec.records import Mount
from tests.conftest import real_tool

if TYPE_CHECKING:
    from pathlib import Path

    from builder.resolved import Resolved

HEX = "ab" * 32
PINNED = f"registry.example.com:5000/team/t@sha256:{HEX}"
CLUSTER = "/shared/c"


def resolved(**launch: Any) -> Resolved:
    """cuda-torchrun (code /shared/project, cache /shared/cache) under Slurm with pyxis."""
    spec = load_preset("cuda-torchrun").spec
    slurm = replace(spec.launch.section(Slurm), cpus_per_node=None, cpus_per_task=16)
    spec = replace(spec, launch=replace(spec.launch, **launch).with_section(slurm))
    return resolve(Stack(spec, "s", None), runtime_name="pyxis", scheduler_name="slurm")


def script(image: str = PINNED, cluster_dir: str = CLUSTER, **launch: Any) -> str:
    return sbatch_script(resolved(**launch), image=image, cluster_dir=cluster_dir)


def srun_argv(text: str, tmp_path: Path) -> list[str]:
    """The words the script's srun gets: the script run by bash, with srun, scontrol and
    mkdir (of the logs folder on shared storage) as stubs."""
    path, out = tmp_path / "job.sbatch", tmp_path / "srun.argv"
    path.write_text(text)
    stubs = (
        "scontrol() { printf '%s\\n' node1 node2; }\n"
        "mkdir() { :; }\n"
        'srun() { printf \'%s\\0\' "$@" > "$SRUN_ARGV"; }\n'
        '. "$1"\n'
    )
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_NODELIST": "node[1-2]", "SRUN_ARGV": str(out)}
    env |= {"SLURM_NNODES": "2", "SLURM_JOB_ID": "42"}
    subprocess.run(
        ["bash", "-c", stubs, "job", str(path)], env=env, capture_output=True, check=True
    )
    return out.read_text().split("\0")[:-1]


def split_srun(argv: list[str]) -> tuple[list[str], list[str]]:
    """(srun's options, the command): the options end at the first word without '--'."""
    first = next(i for i, word in enumerate(argv) if not word.startswith("--"))
    return argv[:first], argv[first:]


# --- pyxis v0.24.0's reading of its options (args.c) --------------------------------


@dataclass
class PyxisArgs:
    image: str | None = None
    mounts: list[tuple[str, str, str]] = field(default_factory=list)
    workdir: str | None = None
    container_name: str | None = None
    mount_home: int = -1
    entrypoint: int = -1
    env_vars: list[str] = field(default_factory=list)

    @property
    def squashfs(self) -> str | None:
        """pyxis_slurmstepd.c l.1356: a value starting with '.' or '/' is a squashfs file."""
        return self.image if self.image and self.image[0] in "./" else None

    @property
    def enroot_uri(self) -> str:
        """l.728-735: otherwise `enroot import` gets docker:// and the value."""
        assert self.image is not None
        if self.image.startswith(("docker://", "dockerd://")):
            return self.image
        return f"docker://{self.image}"


class PyxisError(Exception):
    pass


def _once(old: str | None, new: str, option: str) -> str:
    """Each option twice with different values is an error ("specified multiple times")."""
    if not new:
        raise PyxisError(f"--{option}: argument required")
    if old is not None and old != new:
        raise PyxisError(f"--{option} specified multiple times")
    return new


def _add_mount(args: PyxisArgs, source: str, target: str, flags: str | None) -> None:
    """add_mount (l.285-364): default flags by the source's kind, then dedup."""
    if source[:1] in (".", "/"):  # strspn(source, "./") > 0
        default = "x-create=auto,rbind"
    elif source == "tmpfs":
        default = "x-create=dir"
    elif source == "umount":
        default = "x-detach"
    else:
        raise PyxisError("mount source must be a relative path, an absolute path, ...")
    if target[:1] not in (".", "/"):
        raise PyxisError("mount target must be a relative path or an absolute path")
    entry = (source, target, f"{default},{flags}" if flags else default)
    if entry not in args.mounts:
        args.mounts.append(entry)


def _mounts(args: PyxisArgs, value: str) -> None:
    """spank_option_mount (l.423-454) and parse_mount_option (l.366-421): entries split
    at every ',', each at the first two ':'; '+' in the flags becomes ','."""
    if not value:
        raise PyxisError("--container-mounts: argument required")
    for entry in value.split(","):
        src, sep, rest = entry.partition(":")
        if not src:
            raise PyxisError(f"--container-mounts: invalid format: {value}")
        if not sep:
            _add_mount(args, src, src, None)
            continue
        dst, sep, flags = rest.partition(":")
        if not dst:
            raise PyxisError(f"--container-mounts: invalid format: {value}")
        _add_mount(args, src, dst, flags.replace("+", ",") if flags else None)


def _env(args: PyxisArgs, value: str) -> None:
    """spank_option_container_env (l.671-709): names split at ',', none empty, unique."""
    if not value:
        raise PyxisError("--container-env: argument required")
    for name in value.split(","):
        if not name:
            raise PyxisError(f"--container-env: invalid format: {value}")
        if name not in args.env_vars:
            args.env_vars.append(name)


def pyxis_options(words: list[str]) -> PyxisArgs:
    """What pyxis v0.24.0 makes of srun's words (its own options; srun's others ignored)."""
    args = PyxisArgs()
    for word in words:
        option, _, value = word.removeprefix("--").partition("=")
        if option == "container-image":
            args.image = _once(args.image, value, option)
        elif option == "container-mounts":
            _mounts(args, value)
        elif option == "container-workdir":
            args.workdir = _once(args.workdir, value, option)
        elif option == "container-name":
            args.container_name = _once(args.container_name, value, option)
        elif option == "container-env":
            _env(args, value)
        elif option in ("container-mount-home", "no-container-mount-home"):
            args.mount_home = int(not option.startswith("no-"))
        elif option in ("container-entrypoint", "no-container-entrypoint"):
            args.entrypoint = int(not option.startswith("no-"))
        elif option.startswith(("container-", "no-container-")):
            raise PyxisError(f"an option builder does not expect: {word}")
    return args


# --- enroot's image references (src/docker.sh), run by bash -------------------------

ENROOT_V4 = r"""
# NVIDIA/enroot v4.1.2 src/docker.sh docker::_parse_uri, l.198-300, the credentials
# look-up left out and common::err made a return
parse() {
    local -r uri="$1"
    local -r reg_user="[[:alnum:]_.!~*\'()%\;:\&=+$,-@]+"
    local -r reg_image="[[:lower:][:digit:]/._-]+"
    local -r reg_tag="[[:alnum:]._:-]+"
    local -r reg_digest="sha256:[[:alnum:]]+"
    local user= registry= image= tag=
    if [[ "${uri}" =~ ^docker://((${reg_user})@)?([^/#]+)/(${reg_image}):(${reg_tag})@(${reg_digest})$ ]]; then
        local match_registry="${BASH_REMATCH[3]}"
        local match_image="${BASH_REMATCH[4]}"
        user="${BASH_REMATCH[2]}"
        tag="${BASH_REMATCH[6]}"
        if [[ "${match_registry}" =~ \.|: ]]; then
            registry="${match_registry}"
            image="${match_image}"
        else
            registry="registry-1.docker.io"
            image="${match_registry}/${match_image}"
        fi
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^/#]+)/(${reg_image})@(${reg_digest})$ ]]; then
        local match_registry="${BASH_REMATCH[3]}"
        local match_image="${BASH_REMATCH[4]}"
        user="${BASH_REMATCH[2]}"
        tag="${BASH_REMATCH[5]}"
        if [[ "${match_registry}" =~ \.|: ]]; then
            registry="${match_registry}"
            image="${match_image}"
        else
            registry="registry-1.docker.io"
            image="${match_registry}/${match_image}"
        fi
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^/#]+)/(${reg_image})(:(${reg_tag}))?$ ]]; then
        local match_registry="${BASH_REMATCH[3]}"
        local match_image="${BASH_REMATCH[4]}"
        user="${BASH_REMATCH[2]}"
        tag="${BASH_REMATCH[6]}"
        if [[ "${match_registry}" =~ \.|: ]]; then
            registry="${match_registry}"
            image="${match_image}"
        else
            registry="registry-1.docker.io"
            image="${match_registry}/${match_image}"
        fi
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^/@#:]+):(${reg_tag})@(${reg_digest})$ ]]; then
        user="${BASH_REMATCH[2]}"
        registry="registry-1.docker.io"
        image="library/${BASH_REMATCH[3]}"
        tag="${BASH_REMATCH[5]}"
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^/@#:]+)@(${reg_digest})$ ]]; then
        user="${BASH_REMATCH[2]}"
        registry="registry-1.docker.io"
        image="library/${BASH_REMATCH[3]}"
        tag="${BASH_REMATCH[4]}"
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^/@#:]+)(:(${reg_tag}))?$ ]]; then
        user="${BASH_REMATCH[2]}"
        registry="registry-1.docker.io"
        image="library/${BASH_REMATCH[3]}"
        tag="${BASH_REMATCH[5]}"
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^#/@]+)#(${reg_image}):(${reg_tag})@(${reg_digest})$ ]]; then
        user="${BASH_REMATCH[2]}"
        registry="${BASH_REMATCH[3]}"
        image="${BASH_REMATCH[4]}"
        tag="${BASH_REMATCH[6]}"
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^#/@]+)#(${reg_image})@(${reg_digest})$ ]]; then
        user="${BASH_REMATCH[2]}"
        registry="${BASH_REMATCH[3]}"
        image="${BASH_REMATCH[4]}"
        tag="${BASH_REMATCH[5]}"
    elif [[ "${uri}" =~ ^docker://((${reg_user})@)?([^#/@]+)#(${reg_image})(:(${reg_tag}))?$ ]]; then
        user="${BASH_REMATCH[2]}"
        registry="${BASH_REMATCH[3]}"
        image="${BASH_REMATCH[4]}"
        tag="${BASH_REMATCH[6]}"
    else
        echo "Invalid image reference: ${uri}" >&2
        return 1
    fi
    if [ -z "${tag}" ]; then
        tag="latest"
    fi
    printf "%s\n%s\n%s\n%s\n" "${user}" "${registry}" "${image}" "${tag}"
}
parse "$1"
"""  # noqa: E501 - enroot's own lines, as written
ENROOT_V3 = r"""
# NVIDIA/enroot v3.5.0 src/docker.sh docker::import l.259-270, with docker::_download's
# defaults (l.126-131): registry-1.docker.io, latest, library/ on Docker Hub
uri="$1"
reg_user="[[:alnum:]_.!~*\'()%\;:\&=+$,-@]+"
reg_registry="[^#]+"
reg_image="[[:lower:][:digit:]/._-]+"
reg_tag="[[:alnum:]._:-]+"
if [[ "${uri}" =~ ^docker://((${reg_user})@)?((${reg_registry})#)?(${reg_image})(:(${reg_tag}))?$ ]]; then
    user="${BASH_REMATCH[2]}"
    registry="${BASH_REMATCH[4]:-registry-1.docker.io}"
    image="${BASH_REMATCH[5]}"
    tag="${BASH_REMATCH[7]:-latest}"
else
    echo "Invalid image reference: ${uri}" >&2
    exit 1
fi
if [[ "${image}" != */* ]] && [[ "${registry}" =~ docker\.io$ ]]; then
    image="library/${image}"
fi
printf "%s\n%s\n%s\n%s\n" "${user}" "${registry}" "${image}" "${tag}"
"""  # noqa: E501 - enroot's own lines, as written
DOCKERD_V4 = r"""
# NVIDIA/enroot v4.1.2 src/docker.sh docker::daemon::import l.564-571
reg_image="[[:alnum:]/._:-]+"
[[ "$1" =~ ^[[:alpha:]]+://(${reg_image})$ ]] && echo "${BASH_REMATCH[1]}"
"""


def enroot_reads(uri: str, version: str = ENROOT_V4) -> tuple[str, str, str, str] | None:
    """(user, registry, image, tag) as enroot parses uri, or None: "Invalid image reference"."""
    command = ["bash", "-c", version, "enroot", uri]
    out = subprocess.run(command, check=False, capture_output=True, text=True)
    if out.returncode != 0:
        assert "Invalid image reference" in out.stderr
        return None
    user, registry, image, tag = out.stdout.split("\n")[:4]
    return user, registry, image, tag


# --- the batch script ---------------------------------------------------------------


def test_the_script_passes_bash_and_shellcheck(tmp_path: Path) -> None:
    for name, text in (
        ("pinned", script(args=("--name", "it's $x"), env={"HF_TOKEN": "s3cr3t"})),
        ("squashfs", script(squashfs="/shared/images/t.sqsh")),
    ):
        path = tmp_path / f"{name}.sbatch"
        path.write_text(text)
        subprocess.run(["bash", "-n", str(path)], check=True)
        subprocess.run([real_tool("shellcheck"), str(path)], check=True)


def test_pyxis_reads_the_image_mounts_workdir_and_env_as_meant(tmp_path: Path) -> None:
    text = script(env={"NCCL_DEBUG": "INFO", "A_B": "x y"})
    options, command = split_srun(srun_argv(text, tmp_path))
    assert options[:3] == ["--ntasks-per-node=1", "--cpus-per-task=16", "--kill-on-bad-exit=1"]
    args = pyxis_options(options)
    # pinned, in the one form enroot 3.x and 4.x both read
    assert args.image == f"registry.example.com:5000#team/t:sha256:{HEX}"
    assert args.squashfs is None
    pulled = ("", "registry.example.com:5000", "team/t", f"sha256:{HEX}")
    assert enroot_reads(args.enroot_uri) == pulled
    assert enroot_reads(args.enroot_uri, ENROOT_V3) == enroot_reads(args.enroot_uri)
    # every bind of the run, as meant: the code at the workdir, the cache at its own
    # path, ...; torchrun reads nothing of the cluster folder, which is not bound
    binds = setup_of(resolved(), PINNED, CLUSTER, f"{CLUSTER}/logs").binds
    assert args.mounts == [
        (b.source, b.target, "x-create=auto,rbind" + (",ro" if b.read_only else "")) for b in binds
    ]
    assert args.mounts[:2] == [
        ("/shared/project", "/workspace", "x-create=auto,rbind"),
        ("/shared/cache", "/shared/cache", "x-create=auto,rbind"),
    ]
    assert not any(target.startswith("/etc/builder") for _, target, _ in args.mounts)
    assert args.workdir == "/workspace"
    assert args.mount_home == 0
    assert args.entrypoint == 0
    # never a fixed name: a global-scope named container outlives the job
    assert args.container_name is None
    # every exported name keeps the host's value over the image's
    exports = [line for line in text.splitlines() if line.startswith("export ")]
    exported = {line.removeprefix("export ").split("=", 1)[0] for line in exports}
    assert {"MASTER_ADDR", "MASTER_PORT", "NCCL_DEBUG", "A_B", "HF_HOME"} <= exported
    # ... but enroot's own setting, which is enroot's (pyxis hands it the job's
    # environment): no login shell, whose /etc/profile would reset the image's PATH
    assert "export ENROOT_LOGIN_SHELL=no" in exports
    assert exported - {"ENROOT_LOGIN_SHELL"} <= set(args.env_vars)
    assert "CUDA_VISIBLE_DEVICES" in args.env_vars  # Slurm's per-task devices
    assert "PATH" not in args.env_vars  # the image's PATH (its venv) stays
    # srun runs the launcher itself in the container (after the node check)
    assert command[:2] == ["bash", "-c"]
    assert command[3:6] == ["node-check", "/workspace/train.py", "--"]
    assert any("torchrun" in word for word in command[6:])
    assert command[command.index("--rdzv-id") + 1] == "42"


def test_a_squashfs_is_the_image_and_the_node_check_looks_inside(tmp_path: Path) -> None:
    text = script(squashfs="/shared/images/t.sqsh", script="/opt/app/train.py")
    options, command = split_srun(srun_argv(text, tmp_path))
    args = pyxis_options(options)
    assert args.squashfs == "/shared/images/t.sqsh"
    assert "in a pyxis container of /shared/images/t.sqsh" in text
    # host paths are not in the container srun starts the task in: its script is
    assert command[3:6] == ["node-check", "/opt/app/train.py", "--"]
    assert "/shared/project" not in command[: command.index("--")]


def test_an_unpinned_image_with_a_registry_is_pulled_by_its_tag(tmp_path: Path) -> None:
    text = script(image="nvcr.io/nvidia/pytorch:25.06-py3")
    args = pyxis_options(split_srun(srun_argv(text, tmp_path))[0])
    assert args.image == "nvcr.io#nvidia/pytorch:25.06-py3"
    expected = ("", "nvcr.io", "nvidia/pytorch", "25.06-py3")
    assert enroot_reads(args.enroot_uri) == expected
    assert enroot_reads(args.enroot_uri, ENROOT_V3) == expected


def test_secrets_reach_the_launcher_from_the_bound_file_only(tmp_path: Path) -> None:
    text = script(env={"HF_TOKEN": "s3cr3t", "V": "1"})
    assert "s3cr3t" not in text
    options, command = split_srun(srun_argv(text, tmp_path))
    args = pyxis_options(options)
    secrets = ("/shared/c/secrets.sh", pyxis.SECRETS_IN_CONTAINER, "x-create=auto,rbind,ro")
    assert secrets in args.mounts
    assert "HF_TOKEN" not in args.env_vars  # not in the host's task environment at all
    # inside the container the task's shell sources it, then runs the launcher
    launcher = command[command.index("--") + 1 :]
    assert launcher[:4] == ["sh", "-c", '. "$0" && exec "$@"', pyxis.SECRETS_IN_CONTAINER]
    # ... and the file's value wins over one the image sets
    file = tmp_path / "secrets.sh"
    spec = resolved(env={"HF_TOKEN": "s3cr3t"}).spec
    file.write_text(next(f.text for f in secret_files(spec) if f.path == "secrets.sh"))
    probe = [*launcher[:3], str(file), "sh", "-c", 'printf %s "$HF_TOKEN"']
    env = {"PATH": os.environ["PATH"], "HF_TOKEN": "from-the-image"}
    read = subprocess.run(probe, check=True, env=env, capture_output=True, text=True)
    assert read.stdout == "s3cr3t"


def test_the_batch_action_is_the_command_itself() -> None:
    setup = setup_of(resolved(), PINNED, CLUSTER)
    command = LauncherCommand(("torchrun", "train.py"), env=(("K", "v"),))
    action = pyxis.RUNTIME.batch(setup, command)
    assert action == HostCommand(("torchrun", "train.py"), (("K", "v"),))
    assert action.argv() == ["env", "K=v", "torchrun", "train.py"]
    for start in (pyxis.RUNTIME.run, pyxis.RUNTIME.exec):
        with pytest.raises(UsageError, match="builder slurm"):
            start(setup, command)


# --- refusals -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "says"),
    [
        ("team/train:1.0", "builder push"),
        ("train:1.0", "launch.squashfs"),
        ("registry.example.com/Team/train:1", "lowercase"),
        ("registry.example.com/team/train@sha256:123", "64"),
    ],
)
def test_an_image_enroot_cannot_pull_is_refused(image: str, says: str) -> None:
    with pytest.raises(UsageError, match=says) as caught:
        script(image=image)
    assert caught.value.field == "--image"


@pytest.mark.parametrize(
    ("launch", "field"),
    [
        ({"code": "/shared/my project"}, "launch.code"),
        ({"cache": "/shared/$USER/cache"}, "launch.cache"),
        ({"mounts": (Mount("/data/`id`", "/data"),)}, "launch.mounts[0].source"),
        ({"mounts": (Mount("/data", '/da"ta'),)}, "launch.mounts[0].target"),
        ({"mounts": (Mount("/data", "/da\\ta"),)}, "launch.mounts[0].target"),
        ({"squashfs": "/shared/images/t.sif"}, "launch.squashfs"),
    ],
)
def test_a_path_pyxis_would_misread_is_refused(launch: dict[str, Any], field: str) -> None:
    with pytest.raises(UsageError) as caught:
        script(**launch)
    assert caught.value.field == field
    assert field in str(caught.value)


@pytest.mark.parametrize("env", [{}, {"HF_TOKEN": "x"}])
def test_a_cluster_folder_pyxis_cannot_bind_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(UsageError) as caught:
        script(cluster_dir="/shared/my cluster", env=env)
    assert caught.value.field == "--cluster-dir"


@pytest.mark.parametrize("command", ["launch", "bundle"])
def test_ssh_plans_refuse_pyxis(command: str, tmp_path: Path) -> None:
    args = [command, "--preset", "cuda-torchrun", "--runtime", "pyxis"]
    if command == "bundle":
        args += ["-o", str(tmp_path / "cluster")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "srun" in result.stderr
    assert not (tmp_path / "cluster").exists()


# --- enroot's references and `builder squashfs` ---------------------------------------


HUB = "registry-1.docker.io"


@pytest.mark.parametrize(
    ("image", "enroot", "read"),
    [
        (PINNED, f"registry.example.com:5000#team/t:sha256:{HEX}", "registry.example.com:5000"),
        (f"nvcr.io/nvidia/pt:2-py3@sha256:{HEX}", f"nvcr.io#nvidia/pt:sha256:{HEX}", "nvcr.io"),
        (f"team/train@sha256:{HEX}", f"{HUB}#team/train:sha256:{HEX}", HUB),
        ("docker.io/ubuntu:24.04", f"{HUB}#library/ubuntu:24.04", HUB),
        ("localhost:5000/t:1", "localhost:5000#t:1", "localhost:5000"),
        ("Registry.Example.com/t", "Registry.Example.com#t", "Registry.Example.com"),
    ],
)
def test_enroot_3_and_4_read_the_reference_alike(image: str, enroot: str, read: str) -> None:
    assert enroot_image(image) == enroot
    rest = enroot.partition("#")[2]
    path, _, version = rest.partition(":")
    expected = ("", read, path, version or "latest")
    assert enroot_reads(f"docker://{enroot}") == expected
    assert enroot_reads(f"docker://{enroot}", ENROOT_V3) == expected


def test_why_the_digest_is_written_as_the_tag() -> None:
    at = f"docker://nvcr.io#nvidia/pytorch@sha256:{HEX}"
    assert enroot_reads(at) == ("", "nvcr.io", "nvidia/pytorch", f"sha256:{HEX}")
    assert enroot_reads(at, ENROOT_V3) is None  # 3.x: "Invalid image reference"
    # and enroot 3.x takes docker's REGISTRY/IMAGE for a Docker Hub repository of that name
    assert enroot_reads("docker://nvcr.io/nvidia/pytorch:24.01", ENROOT_V3) == (
        "",
        "registry-1.docker.io",
        "nvcr.io/nvidia/pytorch",
        "24.01",
    )


def test_builder_squashfs_prints_the_enroot_import() -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["squashfs", "team/train:1.0", "-o", "/shared/train.sqsh"])
    assert out.exit_code == 0, out.output
    assert out.stdout == "enroot import --output /shared/train.sqsh dockerd://team/train:1.0\n"
    local = squashfs_import_argv("team/train:1.0", output="/shared/train.sqsh")[-1]
    reads = subprocess.run(
        ["bash", "-c", DOCKERD_V4, "enroot", local], check=True, capture_output=True
    )
    assert reads.stdout.decode() == "team/train:1.0\n"
    pinned = squashfs_import_argv(PINNED, output="/shared/t.squashfs")
    assert pinned == [
        "enroot",
        "import",
        "--output",
        "/shared/t.squashfs",
        f"docker://registry.example.com:5000#team/t:sha256:{HEX}",
    ]
    assert enroot_reads(pinned[-1], ENROOT_V3) == enroot_reads(pinned[-1])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["team/t:1", "-o", "t.sqsh"], "absolute"),
        (["team/t:1", "-o", "/shared/t.sif"], "NAME.sqsh"),
        (["team/t:1", "-o", "/shared/.sqsh"], "NAME.sqsh"),
        (["team/t:1", "-o", "/shared/a,b.sqsh"], "','"),
        (["team/t:1"], "--output"),
        (["Team/t:1", "-o", "/shared/t.sqsh"], "lowercase"),
        (["team/t@sha256:12", "-o", "/shared/t.sqsh"], "sha256"),
    ],
)
def test_builder_squashfs_refuses_what_enroot_or_pyxis_would_misread(
    args: list[str], says: str
) -> None:
    out = CliRunner().invoke(app, ["squashfs", *args])
    assert out.exit_code == 2, out.output
    assert out.stdout == ""
    assert says in out.stderr


def test_the_squashfs_path_check() -> None:
    assert squashfs_problem("/shared/images/t.sqsh") is None
    assert squashfs_problem("/shared/images/t.squashfs") is None
    for bad in ("t.sqsh", "./t.sqsh", "/shared/t", "/shared/t.sif", "/shared/a:b.sqsh", "/.sqsh"):
        assert squashfs_problem(bad) is not None, bad

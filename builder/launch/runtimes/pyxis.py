"""pyxis: srun's own ``--container-*`` options start every task of the step inside an
enroot container of the image (NVIDIA/pyxis, a Slurm SPANK plugin; DGX SuperPOD,
CoreWeave SUNK). Only srun can start it: a batch script's runtime, never an ssh plan's.
Its containers are the job's own processes (they stay in the job's cgroups, GPUs
included), so scancel and the time limit reach them.

What the batch script's srun gets, checked against pyxis v0.24.0 (args.c,
pyxis_slurmstepd.c) and enroot v4.1.2 and v3.5.0 (src/docker.sh), and read by
pyxis v0.15.0 or later (``--container-env``, the newest option used):

- ``--container-image``: launch.squashfs (pyxis reads a value starting with '/' as a
  squashfs file on the node), else the image as enroot names it,
  ``REGISTRY#IMAGE:sha256:<hex>`` when pinned (``launch.squashfs``'s module note: the
  one pinned form enroot 3.x and 4.x both read);
- ``--container-mounts``: the binds, ``SRC:DST[:ro]`` joined by ','. pyxis splits
  the list at ',' and each entry at ':' with no escape (args.c l.382-442), which the
  bind paths exclude already, and writes each as ``echo "SRC DST FLAGS"`` into a bash
  function of enroot's configuration (pyxis_slurmstepd.c l.1031): a '$', '`', '"' or
  '\\' there is the shell's, and before v0.24.0 (commit aff5834) a blank splits the
  entry, so those are refused here;
- ``--container-workdir`` image.workdir (else the image's WORKDIR, or '/');
  ``--no-container-mount-home`` (the home is not the run's: the binds say what
  is); ``--no-container-entrypoint`` (the image's entrypoint drops root and starts
  sshd for the ssh plans; pyxis runs the task as the user already);
- ``--container-env``: the names of the run's environment. The batch script exports
  it on the host, and srun hands it to every task, but pyxis then sets the
  container's own environment over the task's (``spank_setenv(..., overwrite=1)``,
  pyxis_slurmstepd.c l.657-712): the image's value of a name would win, except for
  the names listed here. The device variables Slurm sets per task
  (CUDA_VISIBLE_DEVICES) are listed too; the rest of the task's (SLURM_*) pass as
  they are.

No ``--container-name``: with pyxis's default container_scope=global a named container
outlives the job, and a later job with the same name on that node reuses its root
file system and skips the import, even of another image (pyxis_slurmstepd.c
l.1303-1346, config.c l.37). Unnamed, the container is ``pyxis_<job>.<step>``, imported
for the step and removed after it; the job has one step, so a name would save nothing.

Secrets never reach the script, the command line or the task's environment on the
host: the bundle's 0600 secrets.sh is bound read-only into the container (at the
cluster folder's path there), and the task's shell, inside it, sources it before
the launcher (``. secrets.sh && exec ...``): the values are read where they are used,
after pyxis has set the image's environment, so they win over it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from builder.contract import CLUSTER_DIR
from builder.errors import UsageError, shown
from builder.launch.actions import Bind, HostCommand, bind_problem
from builder.launch.runtimes.base import ImageFile, Runtime, Setup
from builder.launch.secrets import SECRETS_SH
from builder.launch.squashfs import enroot_image, squashfs_problem

if TYPE_CHECKING:
    from builder.launch.actions import Env
    from builder.launch.launchers.base import LauncherCommand
    from builder.spec.records import Spec

BATCH_EXPORTS = ("MASTER_ADDR", "MASTER_PORT")
"""What the batch script exports besides the run's environment (slurm.py's template)."""
SECRETS_IN_CONTAINER = f"{CLUSTER_DIR}/{SECRETS_SH}"
"""Where the container sees the bundle's secrets.sh (the cluster folder's own place)."""
MOUNT_SHELL_CHARS = frozenset(' \t$`"\\')
"""What pyxis's ``echo "SRC DST FLAGS"`` line of enroot's bash configuration reads."""
ONLY_UNDER_SLURM = (
    "runtime pyxis runs only under `builder slurm`: srun's own --container-* options "
    "make its container, on every node of the job; choose docker, apptainer or none for "
    "an ssh plan"
)


class Pyxis(Runtime):
    """srun --container-image: each task in an enroot container of the image."""

    name = "pyxis"
    srun_only = True
    serves_ssh = False
    outside_the_job = False
    isolated = True
    pulls = True
    not_shipped = (
        "its nodes import the image with enroot, from its registry or from a squashfs "
        "file: push it (`builder push`), or make the file once onto shared storage "
        "(`builder squashfs IMAGE -o /shared/NAME.sqsh`) and set launch.squashfs to it"
    )
    # srun lists --container-image only with pyxis's SPANK plugin loaded (plugstack.conf)
    on_node = "command -v enroot && srun --help 2>&1 | grep -q -e --container-image"

    def node_file(self, spec: Spec, image: str | None = None) -> ImageFile:  # noqa: ARG002
        return ImageFile("launch.squashfs", spec.launch.squashfs, "builder squashfs")

    def exec(self, setup: Setup, command: LauncherCommand) -> NoReturn:  # noqa: ARG002
        raise UsageError(ONLY_UNDER_SLURM, field="--runtime", value=self.name)

    def run(self, setup: Setup, command: LauncherCommand) -> NoReturn:  # noqa: ARG002
        raise UsageError(ONLY_UNDER_SLURM, field="--runtime", value=self.name)

    def batch(self, setup: Setup, command: LauncherCommand) -> HostCommand:
        # srun runs it inside the container, in image.workdir (--container-workdir);
        # the batch script exported the run's environment on the host, for every task
        secrets = SECRETS_IN_CONTAINER if setup.secrets else None
        return HostCommand(command.argv, command.env, secrets, None, command.folder_chars)

    def batch_env(self, setup: Setup) -> Env:  # noqa: ARG002
        # enroot starts the container through a login shell by default (ENROOT_LOGIN_SHELL,
        # enroot doc/cmd/start.md), and a Debian image's /etc/profile sets root's PATH
        # anew: the image's own PATH (its venv first) was gone, and the launcher with it
        # ("exec: deepspeed: not found", seen on pyxis v0.24.0 and enroot v4.1.2). pyxis
        # hands the job's environment to enroot (withholding only PATH, LD_* and
        # ENROOT_*_PATH, pyxis_slurmstepd.c l.361-390) and enroot's environment wins over
        # its configuration (enroot.in, config::export), so the task's environment is the
        # image's own, as under docker and apptainer.
        return (("ENROOT_LOGIN_SHELL", "no"),)

    def srun_options(self, setup: Setup) -> tuple[str, ...]:
        binds = _binds(setup)
        names = {name for name, _ in setup.env}
        names |= {*BATCH_EXPORTS, *setup.platform.device_variables}
        return (
            f"--container-image={_image(setup)}",
            *([f"--container-mounts={','.join(b.text() for b in binds)}"] if binds else []),
            f"--container-workdir={setup.spec.image.workdir}",
            "--no-container-mount-home",
            "--no-container-entrypoint",
            f"--container-env={','.join(sorted(names))}",
        )

    def host_paths(self, setup: Setup) -> tuple[str, ...]:
        """What the batch script's node check looks for: it runs in srun's task, which
        pyxis starts inside the container, where the host's paths are not; so the
        script, where the launcher opens it there. pyxis itself stops on a missing
        mount source (v0.24.0 validate_mount_sources, pyxis_slurmstepd.c l.972; before,
        enroot's mount fails naming it), and enroot on a missing squashfs file."""
        script, workdir = setup.spec.launch.script, setup.spec.image.workdir
        return (script if script[:1] == "/" else f"{workdir.rstrip('/')}/{script}",)

    def where(self, setup: Setup) -> str:
        source = setup.spec.launch.squashfs or setup.image
        return f"in a pyxis container of {source} (srun --container-image)"

    def purpose(self, launcher: str) -> str:
        return f"{launcher} in a pyxis container"


def _image(setup: Setup) -> str:
    """--container-image: launch.squashfs, or the image as enroot pulls it."""
    squashfs = setup.spec.launch.squashfs
    if squashfs is None:
        return enroot_image(setup.image)
    if why := squashfs_problem(squashfs):
        raise UsageError(
            f"launch.squashfs {shown(squashfs)}: {why}", field="launch.squashfs", value=squashfs
        )
    return squashfs


def _binds(setup: Setup) -> tuple[Bind, ...]:
    """The run's binds, and the secrets file where the cluster folder is not bound,
    each path one that pyxis carries intact."""
    binds = list(setup.binds)
    secrets = setup.secret_file(SECRETS_SH)  # None without secrets; refused without a folder
    if secrets is not None and not setup.bind_cluster:
        cluster = setup.cluster_dir or ""
        if why := bind_problem(cluster):
            raise UsageError(f"--cluster-dir {shown(cluster)}: {why}", field="--cluster-dir")
        binds.append(Bind(secrets, SECRETS_IN_CONTAINER, read_only=True))
    for path in (path for bind in binds for path in (bind.source, bind.target)):
        bad = sorted(MOUNT_SHELL_CHARS.intersection(path))
        if bad:
            field, chars = _field_of(setup, path), ", ".join(repr(c) for c in bad)
            raise UsageError(
                f"{field} {shown(path)}: it holds {chars}, and pyxis writes each mount into "
                "a line of enroot's bash configuration (echo \"SRC DST FLAGS\"), where '$', "
                "'`', '\"' and '\\' are the shell's and, before pyxis v0.24.0, a blank splits "
                "the entry: use a path without them",
                field=field,
                value=path,
            )
    return tuple(binds)


def _field_of(setup: Setup, path: str) -> str:
    """The field or option a bind's path came from, for a message."""
    launch = setup.spec.launch
    for field, value in (("launch.code", launch.code), *launch.own_path_folders()):
        if path == value:
            return field
    for index, mount in enumerate(launch.mounts):
        if path in (mount.source, mount.target):
            side = "source" if path == mount.source else "target"
            return f"launch.mounts[{index}].{side}"
    if path == setup.spec.image.workdir:
        return "image.workdir"
    return "--cluster-dir"


RUNTIME = Pyxis()

"""What runs on a node, as typed records: ``argv()`` is the one place each becomes a
command line (``docker run``/``exec``/``stop``, ``apptainer exec``, or the
node's own shell). The runtimes (``launch.runtimes``) choose them; plans hold them
as data until launch.sh, the rehearsal or the Slurm script runs them.

How a run is stopped is an action too. ``docker exec`` starts its command in a
session of its own, which the exec's CLI does not signal when it dies (Ctrl-C
on a `docker exec` without a terminal leaves DeepSpeed's runner, pdsh and every
rank running): ``stop_exec`` is a second ``docker exec`` that sends SIGTERM to
the process group of the command the first one started, found by the marker
variable in its environment. DeepSpeed's runner answers SIGTERM by stopping
pdsh and running `pkill` on every node; mpirun by stopping its ranks
everywhere. A detached container is stopped with ``docker stop``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.errors import UsageError, shown

Env = tuple[tuple[str, str], ...]
LAUNCH_MARKER = "BUILDER_LAUNCH"
"""Set in the environment of the launcher a ``docker exec`` starts: its stop finds it."""
STOP_GRACE = 30
"""Seconds `docker stop` gives a container's main process (torchrun stops its workers
and may wait for them to save) before it kills the rest."""
STOP_EXEC = r"""marker=$1 grace=$2
found=
for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    stat=$(cat "$dir/stat" 2>/dev/null) || continue
    set -- ${stat##*) }
    # started by docker exec (its parent is outside the container), not this script
    [ "$2" = 0 ] && [ "$pid" != 1 ] && [ "$pid" != $$ ] || continue
    grep -Fqxz -e "$marker" "$dir/environ" 2>/dev/null || continue
    found="$found $pid"
    # no "--": dash's kill takes none, and "-PID" is the process group
    kill -TERM "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
done
if [ -z "$found" ]; then
    echo "stop: no launcher with $marker runs in $(hostname)" >&2
    exit 0
fi
echo "stop: sent SIGTERM to the launcher (process group$found) in $(hostname)" >&2
# it stops the ranks on every node, then itself: wait for that
waited=0
for pid in $found; do
    while kill -0 "-$pid" 2>/dev/null || kill -0 "$pid" 2>/dev/null; do
        if [ "$waited" -ge "$grace" ]; then
            kill -KILL "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
            echo "stop: the launcher (process group $pid) still ran after $grace s: killed;" \
                "ranks it had not stopped may be left on other nodes" >&2
            exit 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
done
echo "stop: the launcher has ended" >&2
"""


def normal_path(path: str) -> str:
    """path as every check and every runtime sees it: one '/' between parts and none at
    the end (//tmp/ckpt is /tmp/ckpt, which the node-local check must see)."""
    collapsed = re.sub("/{2,}", "/", path)
    return collapsed.rstrip("/") or collapsed[:1]


PATH_MAX = 4096
"""Linux's limit on a path's bytes, its terminating NUL included (limits.h)."""
NAME_MAX = 255
"""Linux's limit on the bytes of one name in a path (limits.h)."""


def bind_problem(path: str) -> str | None:
    """Why path cannot be one side of a bind, or None: the one check of every value that
    reaches a bind list (launch.code, launch.cache, launch.mounts, the cluster folder).
    `docker run -v` splits a bind at ':', `apptainer --bind` at ':' and ',' (a
    comma starts the next bind), a relative source is a docker named volume, and a
    line break ends a script line."""
    if not path.startswith("/"):
        return (
            "give an absolute path, the same on every node (docker takes a relative "
            "source for the name of a volume)"
        )
    bad = sorted({c for c in path if c in ":," or not c.isprintable()})
    if bad:
        return (
            f"it holds {', '.join(repr(c) for c in bad)}: `docker run -v` splits a bind at "
            "':', `apptainer --bind` at ':' and ',', and a line break ends a script line; "
            "use a path without them"
        )
    if any(part in (".", "..") for part in path.split("/")):
        return "write it without '.' or '..' (the runtimes do not resolve them alike)"
    if len(path.encode()) >= PATH_MAX or any(
        len(part.encode()) > NAME_MAX for part in path.split("/")
    ):
        return (
            f"no Linux file system holds it: a path is under {PATH_MAX} bytes and each "
            f"of its names at most {NAME_MAX}"
        )
    return None


@dataclass(frozen=True)
class Bind:
    """A host path bound into the container; both sides pass ``bind_problem``."""

    source: str
    target: str
    read_only: bool = False

    def __post_init__(self) -> None:
        for path in (self.source, self.target):
            if why := bind_problem(path):
                raise UsageError(f"mount path {shown(path)}: {why}", value=path)

    def text(self) -> str:
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")


@dataclass(frozen=True)
class ContainerStart:
    """`docker run`: a node's container (detached with its sshd, or attached to the shell
    that runs it and removed after)."""

    image: str
    name: str | None
    flags: tuple[str, ...]
    """The platform's flags (GPUs, devices, IPC)."""
    fabric: tuple[str, ...] = ()
    """What the node's network fabric needs (InfiniBand devices, EFA)."""
    binds: tuple[Bind, ...] = ()
    env: Env = ()
    command: tuple[str, ...] = ()
    network: str = "host"
    hostname: str | None = None
    aliases: tuple[str, ...] = ()
    labels: Env = ()
    detach: bool = True
    remove: bool = False
    sig_proxy: bool = True
    """An attached CLI passes the signals it gets on to the container's process."""
    env_file: str | None = None
    """The host's file of secret variables (``NAME=value`` lines, read by docker)."""
    inherit: tuple[str, ...] = ()
    """Variables passed in from the environment of whoever runs it, where set there (a
    Slurm task's SLURM_PROCID, CUDA_VISIBLE_DEVICES): `--env NAME`."""

    def argv(self) -> list[str]:
        argv = ["docker", "run"]
        for key, value in self.labels:
            argv += ["--label", f"{key}={value}"]
        if self.detach:
            argv.append("--detach")
        if self.name is not None:
            argv += ["--name", self.name]
        if self.remove:
            argv.append("--rm")
        if not self.detach and not self.sig_proxy:
            argv.append("--sig-proxy=false")
        argv += ["--network", self.network]
        if self.hostname is not None:
            argv += ["--hostname", self.hostname]
        for alias in self.aliases:
            argv += ["--network-alias", alias]
        argv += [*self.flags, *self.fabric]
        for bind in self.binds:
            argv += ["--volume", bind.text()]
        if self.env_file is not None:
            argv += ["--env-file", self.env_file]
        for key, value in self.env:
            argv += ["--env", f"{key}={value}"]
        for name in self.inherit:
            argv += ["--env", name]
        return ["docker", "run", *run_options(argv[2:]), self.image, *self.command]


_LONG = {
    "-d": "--detach",
    "-e": "--env",
    "-h": "--hostname",
    "-i": "--interactive",
    "-l": "--label",
    "-m": "--memory",
    "-p": "--publish",
    "-t": "--tty",
    "-u": "--user",
    "-v": "--volume",
    "-w": "--workdir",
}
"""`docker run`'s short options, as the long ones they spell."""
_SWITCHES = frozenset(
    {
        "--detach",
        "--disable-content-trust",
        "--init",
        "--interactive",
        "--no-healthcheck",
        "--oom-kill-disable",
        "--privileged",
        "--publish-all",
        "--read-only",
        "--rm",
        "--sig-proxy",
        "--tty",
        "--use-api-socket",
    }
)
"""`docker run`'s options that take no value (or only as --name=value)."""
_KEYED = {
    "--env": lambda value: value.partition("=")[0],
    "--label": lambda value: value.partition("=")[0],
    "--sysctl": lambda value: value.partition("=")[0],
    "--ulimit": lambda value: value.partition("=")[0],
    "--volume": lambda value: [*value.split(":"), ""][1],
}
"""Repeatable options where a later value for the same key replaces an earlier one, as
docker itself reads them: a variable, a label, a sysctl, a limit, a bind's target."""
_REPEATABLE = frozenset(
    {
        "--add-host",
        "--cap-add",
        "--cap-drop",
        "--device",
        "--device-cgroup-rule",
        "--dns",
        "--dns-option",
        "--dns-search",
        "--env-file",
        "--expose",
        "--group-add",
        "--label-file",
        "--link",
        "--mount",
        "--network-alias",
        "--publish",
        "--security-opt",
        "--storage-opt",
        "--tmpfs",
        "--volumes-from",
    }
)
"""Repeatable options whose every distinct value counts (a device, a capability)."""


def run_options(tokens: list[str]) -> list[str]:
    """`docker run`'s options with none given twice: the platform's flags, the fabric's
    and the plan's own meet here, the one place a run line is assembled, and may ask for
    the same thing (CUDA and InfiniBand both want `--ulimit memlock=-1`). Of two that
    set the same thing (an option docker takes once, a variable, a limit, a bind's
    target), the later is kept, as docker itself would read them; an identical repeat
    of a repeatable one (`--device`, `--cap-add`) is dropped."""
    options: list[tuple[str, str | None, tuple[str, ...]]] = []
    rest = iter(tokens)
    for token in rest:
        name, sep, value = token.partition("=") if token.startswith("--") else (token, "", "")
        name = _LONG.get(name, name)
        if sep:
            options.append((name, value, (token,)))
        elif name in _SWITCHES:
            options.append((name, None, (token,)))
        else:
            value = next(rest)
            options.append((name, value, (token, value)))

    def key(name: str, value: str | None) -> tuple[str, str | None]:
        if name in _KEYED and value is not None:
            return name, _KEYED[name](value)
        return (name, value) if name in _REPEATABLE else (name, None)

    last = {key(name, value): index for index, (name, value, _) in enumerate(options)}
    return [
        word
        for index, (name, value, words) in enumerate(options)
        if last[key(name, value)] == index
        for word in words
    ]


@dataclass(frozen=True)
class ContainerExec:
    """`docker exec` of a command in a node's running container."""

    container: str
    command: tuple[str, ...]
    env: Env = ()
    workdir: str | None = None

    def argv(self) -> list[str]:
        argv = ["docker", "exec"]
        for key, value in self.env:
            argv += ["--env", f"{key}={value}"]
        if self.workdir is not None:
            argv += ["--workdir", self.workdir]
        return [*argv, self.container, *self.command]


@dataclass(frozen=True)
class ApptainerExec:
    """`apptainer exec --cleanenv` (or singularity's) of a command in the SIF."""

    program: str
    sif: str
    command: tuple[str, ...]
    flags: tuple[str, ...] = ()
    binds: tuple[Bind, ...] = ()
    env: Env = ()
    env_file: str | None = None
    """The host's file of secret variables (shell syntax, evaluated by apptainer)."""
    workdir: str | None = None
    """Where the command starts (--pwd); apptainer's default is the host's own folder."""
    inherit: tuple[str, ...] = ()
    """Variables passed in from the environment of whoever runs it, where set there (a
    Slurm task's SLURM_PROCID, CUDA_VISIBLE_DEVICES), which --cleanenv would drop."""

    @property
    def env_prefix(self) -> str:
        """How the program takes a variable through --cleanenv."""
        return f"{self.program.upper()}ENV_"

    def argv(self) -> list[str]:
        env = [f"{self.env_prefix}{key}={value}" for key, value in self.env]
        argv = (["env", *env] if env else []) + [self.program, "exec", "--cleanenv"]
        if self.env_file is not None:
            argv += ["--env-file", self.env_file]
        argv += self.flags
        for bind in self.binds:
            argv += ["--bind", bind.text()]
        if self.workdir is not None:
            argv += ["--pwd", self.workdir]
        argv = [*argv, self.sif, *self.command]
        if not self.inherit:
            return argv
        # each set variable as PREFIX_NAME (the names are builder's: no value is pasted)
        script = (
            'while [ "$1" != -- ]; do eval "[ -z \\"\\${$1+x}\\" ] || export '
            f'{self.env_prefix}$1=\\"\\$$1\\""; shift; done; shift; exec "$@"'
        )
        return ["sh", "-c", script, "inherit", *self.inherit, "--", *argv]


@dataclass(frozen=True)
class HostCommand:
    """A command on the node itself (runtime none: the node's environment is the image)."""

    command: tuple[str, ...]
    env: Env = ()
    env_file: str | None = None
    """The host's file of secret variables (shell exports), sourced before the command."""
    workdir: str | None = None
    """The folder the command starts in (launch.code)."""
    folder_chars: str | None = None
    """Without a workdir: the characters the folder it starts in must keep to (the inside
    of a bracket expression), checked before it starts."""

    def argv(self) -> list[str]:
        prefix = ["env", *(f"{key}={value}" for key, value in self.env)] if self.env else []
        # sh reads the paths from its arguments: argv holds them, never a secret value
        steps: list[str] = []
        words: list[str] = []
        if self.workdir is not None:
            steps.append(f'cd "${len(words)}"')
            words.append(self.workdir)
        elif self.folder_chars is not None:
            steps.append(_folder_check(self.folder_chars))
        if self.env_file is not None:
            steps.append(f'. "${len(words)}"')
            words.append(self.env_file)
        if not steps:
            return [*prefix, *self.command]
        shifts = ["shift"] * max(len(words) - 1, 0)
        script = " && ".join([*steps, *shifts, 'exec "$@"'])
        return [*prefix, "sh", "-c", script, *(words or ["sh"]), *self.command]


def _folder_check(chars: str) -> str:
    return (
        f"case $PWD in *[!{chars}]*) echo \"builder: DeepSpeed's pdsh runner pastes this "
        f"folder ($PWD) unquoted into every node's shell line: start here from a folder "
        f'whose path keeps to [{chars}], or set launch.code" >&2; '
        "exit 2;; esac"
    )


@dataclass(frozen=True)
class ContainerStop:
    """`docker stop`: SIGTERM to a container's main process, SIGKILL after the grace."""

    name: str
    grace: int = STOP_GRACE

    def argv(self) -> list[str]:
        return ["docker", "stop", "--time", str(self.grace), self.name]


@dataclass(frozen=True)
class ContainerRemove:
    """`docker rm --force`: a node's container gone, running or not (a preflight's sshd
    container, which nothing else removes)."""

    name: str

    def argv(self) -> list[str]:
        return ["docker", "rm", "--force", self.name]


def stop_exec(container: str, marker: str) -> ContainerExec:
    """What stops the launcher a ``docker exec`` started with the marker's value in its
    environment."""
    marker_line = f"{LAUNCH_MARKER}={marker}"
    return ContainerExec(container, ("sh", "-c", STOP_EXEC, "stop", marker_line, str(STOP_GRACE)))


Action = (
    ContainerStart | ContainerExec | ApptainerExec | HostCommand | ContainerStop | ContainerRemove
)

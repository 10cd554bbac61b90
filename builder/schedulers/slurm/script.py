"""The Slurm scheduler, `builder slurm`: one Slurm task per node, each running the
launcher in the runtime.

The shape people use: ``#SBATCH`` options from the spec (and the platform's
resources), the master from ``scontrol show hostnames "$SLURM_JOB_NODELIST"``
(first line), the run's environment exported once, ``srun
--ntasks-per-node=1`` of the same command on every node (for torchrun: c10d
rendezvous, id = the job id). The runtime's batch action is the plan's own
(``launch.runtimes``); with Apptainer the environment is re-injected as
APPTAINERENV_* (``--cleanenv`` drops the rest); with ``none`` the image is
the nodes' own environment. Checked by a real Slurm cluster in tests/integration.

Two places decide what reaches the script: ``sbatch_option`` checks every
``#SBATCH`` line's option and value (sbatch reads a header line up to the
next blank, and bash never sees it, so a line break would start a shell
line and a blank a second option: values are one word of what Slurm accepts
for that option), and ``shell_word`` quotes every value of a shell line.
Secret variables are not in the script: the batch action reads them from the
bundle's 0600 files (``launch.secrets``).
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from builder.cluster.folder import RECORD
from builder.cluster.hostfile import hosts_from_nodes
from builder.contract import JOB_HOSTFILE, JOB_LOGS
from builder.errors import Problem, SpecError, UsageError, shown
from builder.launch.launchers import FromShell, torchrun
from builder.launch.plan import Placement, check_pair, prepare
from builder.launch.secrets import secret_files
from builder.output import OutputFile
from builder.schedulers.base import build_step, rsync_to, ship_command
from builder.schedulers.slurm.section import Slurm
from builder.spec.records import ENV_NAME
from builder.templating import HEADER, render_template

if TYPE_CHECKING:
    from collections.abc import Iterable

    from builder.cluster.folder import RunFolder
    from builder.resolved import Resolved

# Left for the batch shell to expand on the node, never quoted away.
JOB_LOGS_FOLDER = FromShell('"$LOGS"')
NODE_LOG = FromShell('"$LOGS/%N.out"')
"""srun's --output: one file per node (srun's %N), its tasks' stdout and stderr."""
NNODES = FromShell('"$SLURM_NNODES"')
MASTER = FromShell('"$MASTER_ADDR"')
ENDPOINT = FromShell('"$MASTER_ADDR:$MASTER_PORT"')
JOB = FromShell('"$SLURM_JOB_ID"')

_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_NUMBER = r"\d{1,9}"
_TIME = "|".join(
    (
        rf"{_NUMBER}(:{_NUMBER}){{0,2}}",  # MM, MM:SS, HH:MM:SS
        rf"{_NUMBER}-{_NUMBER}(:{_NUMBER}){{0,2}}",  # D-HH, D-HH:MM, D-HH:MM:SS
        "UNLIMITED|INFINITE|unlimited|infinite",
    )
)
_VALUES = {
    "partition": (rf"{_NAME}(,{_NAME})*", "a partition name, or several joined by ','"),
    "account": (_NAME, "an account name (letters, digits, '_', '.', '-')"),
    "time": (
        _TIME,
        "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, UNLIMITED or INFINITE",
    ),
}
# Other options (launch.slurm.extra, the platform's): one word of what node lists,
# constraints, GRES, sizes, mail addresses and file patterns are written with.
_WORD = (r"[A-Za-z0-9_.,:=%@+/*&|!\[\]-]{1,256}", "one word without blanks, quotes or '#'")
_OPTION = re.compile(r"[a-z][a-z0-9-]{0,63}")

NODE_CHECK = (
    "bash",
    "-c",
    'while [ "$1" != -- ]; do if [ ! -e "$1" ]; then echo "job: $1 is missing on $(hostname);'
    " the run folder (builder bundle --scheduler slurm writes it, secrets included), the code"
    ' and cache folders, mounts, script and SIF must be on every node at the same path"'
    ' >&2; exit 1; fi; shift; done; shift; exec "$@"',
    "node-check",
)
"""Runs first in every node's task: a missing bind source stops Apptainer (docker makes
an empty folder), a missing script fails only after the rendezvous; say which node."""
MEMLOCK_CHECK = (
    "bash",
    "-c",
    'limit=$(ulimit -l); if [ "$limit" != unlimited ]; then echo "job: locked memory on'
    " $(hostname) is limited to $limit KiB; RDMA (image.fabric) registers its buffers and"
    " needs it unlimited: set PropagateResourceLimitsExcept=MEMLOCK in slurm.conf (srun"
    " passes on the submitting shell's limit) or raise memlock in the nodes' limits\""
    ' >&2; exit 1; fi; exec "$@"',
    "memlock-check",
)
"""Runs first in every node's task of a job on an RDMA fabric (Apptainer and bare nodes
keep the task's limits; docker sets its own with --ulimit)."""
DOCKER_UNDER_SRUN = (
    "`builder slurm` does not run docker under srun: `docker run` asks dockerd to start "
    "the container, so it runs outside the job's cgroup (it sees every GPU, not the job's, "
    "and ignores its CPU and memory limits) and survives scancel and the job's time limit. "
    "Use --runtime apptainer (a SIF: `builder sif`) or --runtime none on nodes whose "
    "environment is the image; set launch.slurm.docker: true to accept docker anyway"
)
CPUS_ADVICE = (
    "set launch.slurm.cpus_per_node to the CPUs each node gives the run: its {slots} rank(s) "
    "and their data-loader workers (e.g. the node's cores); without it many sites give a "
    "task one CPU, which every rank then shares"
)


SCRIPT = "job.sbatch"
README = "README.md"


def job_files(
    resolved: Resolved, *, image: str, folder: RunFolder, spec_ref: str
) -> list[OutputFile]:
    """The job script, the secret files it reads (0600, when launch.env holds secrets)
    and a README with the commands from here to the run (``Scheduler.materialize``); both
    name the folder where the nodes see it."""
    script = sbatch_script(resolved, image=image, cluster_dir=folder.nodes, option=folder.option)
    readme = _readme(resolved, image, folder, spec_ref)
    return [
        OutputFile(SCRIPT, 0o755, script),
        OutputFile(README, 0o644, readme),
        *secret_files(resolved.spec),
    ]


BATCH_LAUNCHER = torchrun.LAUNCHER
"""What each node's batch task runs when the spec's launcher cannot (the advice of the
refusal, and what the rehearsal's Slurm job runs): named, never picked by sort order."""


def sbatch_script(
    resolved: Resolved, *, image: str, cluster_dir: str, option: str = "--cluster-dir"
) -> str:
    """The job script of the resolved stack's run (its runtime and launcher); option:
    what gave cluster_dir, which a refusal of it names (--node-dir when that did)."""
    spec, source = resolved.spec, resolved.stack.source
    launch, run, launcher = spec.launch, resolved.runtime, resolved.launcher
    if not launcher.batch:
        raise UsageError(
            f"launcher {launcher.name!r} (launch.launcher, or --launcher) cannot run in a Slurm "
            f"job: {launcher.batch_refusal}",
            field="--launcher",
            value=launcher.name,
        )
    check_pair(resolved)
    if launch.uneven:
        raise SpecError(
            source or "builder",
            [
                Problem(
                    "launch.node_slots",
                    "a Slurm job gives every node the same tasks (--ntasks-per-node) and the "
                    "batch hostfile the same slots; nodes of different sizes would need a "
                    "heterogeneous job (#SBATCH hetjob), which builder does not write yet: "
                    "run it over ssh (`builder bundle`), or one job per node size",
                )
            ],
        )
    logs, where = (
        (launch.logs, "launch.logs")
        if launch.logs
        else (
            f"{cluster_dir}/{JOB_LOGS}",
            option,
        )
    )
    if "%" in logs or "\\" in logs:
        # srun's filename patterns (man srun, "filename pattern"): every '%' of the path is
        # one (%N, %j, ...), and a backslash anywhere turns them all off ("\\: do not
        # process any of the replacement symbols"): every node would write one "%N.out"
        raise UsageError(
            f"{where} {shown(logs)}: the job's logs go under it, and srun's --output reads "
            "that whole path as a filename pattern: each '%' is a pattern (%N, %j, ...) and "
            "a backslash turns every pattern off, so that all nodes would write one literal "
            "'%N.out'; use a folder without '%' or '\\'",
            field=where,
            value=logs,
        )
    if run.outside_the_job and not launch.section(Slurm).docker:
        raise UsageError(DOCKER_UNDER_SRUN)
    nnodes = len(hosts_from_nodes(launch.nodes, launch.slots))
    placement = Placement(
        (),
        MASTER,
        JOB,
        nnodes=NNODES,
        endpoint=ENDPOINT,
        batch=True,
        logs=logs,
        job_logs=JOB_LOGS_FOLDER,
    )
    setup, command = prepare(resolved, image, cluster_dir, placement)
    action = run.batch(setup, command)
    exports = [*setup.env, *run.batch_env(setup)]
    tasks = launcher.tasks_per_node(launch.slots)
    options = _options(resolved, nnodes, tasks)
    secrets = setup.secret_file(run.secrets_file)  # the bundle's, read by each node's task
    paths = (*run.host_paths(setup), *([secrets] if secrets else []))
    checked = [*NODE_CHECK, *paths, "--"] if paths else []
    if resolved.fabric.needs_memlock and not run.outside_the_job:
        checked = [*MEMLOCK_CHECK, *checked]
    return render_template(
        "slurm/job.sbatch.j2",
        {
            "options": options,
            "cpus": str(task_cpus(resolved, tasks)),
            "kill": (
                "--no-kill --kill-on-bad-exit=0" if launch.min_nodes else "--kill-on-bad-exit=1"
            )
            # a node's tasks are its ranks (launcher srun): each line says whose (--label)
            + (" --label" if tasks > 1 else ""),
            "elastic": bool(launch.min_nodes),
            "header": _comment(HEADER.format(source=source)),
            "where": _comment(run.where(setup)),
            "what": _comment(launcher.batch_task),
            "port": shell_word(str(launch.master_port)),
            "exports": [_assignment(key, value) for key, value in exports],
            "tasks": str(tasks),
            "logs": shell_word(f"{logs}/") + '"$SLURM_JOB_ID"',
            "node_log": NODE_LOG,
            "slots": str(launch.slots),
            "hostfile": _job_hostfile(cluster_dir) if launcher.batch_hostfile else "",
            "srun_options": [shell_word(option) for option in run.srun_options(setup)],
            "command": shell_line([*checked, *action.argv()]),
            "requeue": str(launch.section(Slurm).requeue or ""),
        },
    )


def _job_hostfile(cluster_dir: str) -> str:
    """Where the script writes the job's hostfile (in the cluster folder on the host)."""
    return shell_word(f"{cluster_dir}/{JOB_HOSTFILE}") + '"$SLURM_JOB_ID"'


def shell_word(value: str) -> str:
    """One value as a word of the batch script's shell lines: quoted, unless it is the
    shell's own (FromShell, made only by builder). Every value goes through here."""
    return value if isinstance(value, FromShell) else shlex.quote(value)


def shell_line(argv: Iterable[str]) -> str:
    """argv as one line of the batch script: every value quoted but the shell's own."""
    return " ".join(shell_word(a) for a in argv)


def sbatch_option(option: str, value: str | None, field: str, source: str = "") -> str:
    """One ``#SBATCH`` line's text, ``--option=value`` (or ``--option`` for a flag), once
    option and value are what Slurm accepts there. field names where the value came
    from: a spec field (an error is a SpecError of source) or, without source, builder's
    own or an option's (a UsageError)."""
    problem = _option_problem(option, value)
    if problem is not None:
        message = f"{value!r} for #SBATCH --{option}: {problem}"
        if source:
            raise SpecError(source, [Problem(field, message)])
        raise UsageError(f"{field}: {message}")
    return f"--{option}={value}" if value else f"--{option}"


def _option_problem(option: str, value: str | None) -> str | None:
    if not _OPTION.fullmatch(option):
        return (
            "an option name is lower-case letters, digits and '-' (without the leading "
            "'--'), e.g. exclusive or mail-user"
        )
    if value is None or value == "":
        return None
    if any(c in value for c in "\n\r\0"):
        return "a header line ends at a line break, so the rest would run as shell: remove it"
    if value.startswith("-"):
        return "a value may not start with '-', where sbatch would read another option"
    pattern, what = _VALUES.get(option, _WORD)
    if not re.fullmatch(pattern, value):
        return f"write it as {what}"
    return None


OWNED = {
    "job-name": "name",
    "nodes": "launch.nodes",
    "ntasks": "launch.slots and launch.launcher",
    "ntasks-per-node": "launch.slots and launch.launcher",
    "cpus-per-task": "launch.slurm.cpus_per_node or cpus_per_task",
    "no-kill": "launch.min_nodes",
    "gpus": "launch.slurm.gpus_per_node",
    "gpus-per-node": "launch.slurm.gpus_per_node",
    "gres": "launch.slurm.gpus_per_node",
    "gpus-per-task": "launch.slurm.gpus_per_task",
    "gpu-bind": "launch.slurm.gpu_bind",
    "exclusive": "launch.slurm.exclusive",
    "mem": "launch.slurm.mem",
    "partition": "launch.slurm.partition",
    "account": "launch.slurm.account",
    "time": "launch.slurm.time",
    "requeue": "launch.slurm.requeue",
    "no-requeue": "launch.slurm.requeue",
    "signal": "launch.slurm.requeue",
    "open-mode": "launch.slurm.requeue",
    "output": "builder (the job's log)",
    "error": "builder (the job's log)",
    "chdir": "builder (the script names every path)",
    "wrap": "builder (the script is the job)",
}
"""The #SBATCH options builder writes itself, and the field that sets each: launch.slurm.extra
may not say them again (sbatch takes the last, silently)."""
ALIASES = {"tasks-per-node": "ntasks-per-node"}
"""sbatch's long options that are another's other name (Slurm's src/common/slurm_opt.c;
not in `sbatch --help`): sbatch 22.05.8 reads --tasks-per-node=2 as --ntasks-per-node."""
MEMORY_PER = ("mem-per-cpu", "mem-per-gpu")
"""sbatch's other ways of asking for memory: each refused beside --mem ("mutually
exclusive")."""


def sbatch_reads(option: str, names: Iterable[str]) -> list[str]:
    """What sbatch's getopt_long reads option as among names: the one it names, else every
    name it begins (getopt takes a unique start of an option: --ntasks-per-n is
    --ntasks-per-node, --job is --job-name, --outp is --output; sbatch 22.05.8 measured)."""
    names = list(names)
    if option in names:
        return [option]
    return [name for name in names if name.startswith(option)]


def _owner(option: str) -> str | None:
    """The option builder writes that option is to sbatch (itself, an alias, or a start
    of either), or None."""
    spelled = {**{name: name for name in OWNED}, **ALIASES}
    read = sbatch_reads(option, spelled)
    return spelled[read[0]] if read else None


def _options(resolved: Resolved, nnodes: int, tasks: int) -> list[str]:
    """Every #SBATCH line, each through sbatch_option; a value from the spec's fields is
    reported as a problem of the spec (source), builder's own as a usage error."""
    spec, source, platform = resolved.spec, resolved.stack.source, resolved.platform
    slurm = spec.launch.section(Slurm)
    lines = [
        sbatch_option("job-name", spec.name, "name", source),
        sbatch_option("nodes", str(nnodes), "launch.nodes", source),
        sbatch_option("ntasks-per-node", str(tasks), "builder"),
    ]
    for item in platform.slurm_options(spec.launch.slots, slurm.gpus_per_node):
        option, _, given = item.removeprefix("--").partition("=")
        lines.append(sbatch_option(option, given, f"the {platform.name} platform"))
    cpus, problems = _cpus(resolved, tasks)
    if cpus is not None:
        field = (
            "launch.slurm.cpus_per_node" if slurm.cpus_per_node else "launch.slurm.cpus_per_task"
        )
        lines.append(sbatch_option("cpus-per-task", str(cpus), field, source))
    if spec.launch.min_nodes:
        lines.append(sbatch_option("no-kill", None, "launch.min_nodes", source))
    for name, value in (
        ("partition", slurm.partition),
        ("account", slurm.account),
        ("time", slurm.time),
        ("mem", slurm.mem),
        ("gpus-per-task", None if slurm.gpus_per_task is None else str(slurm.gpus_per_task)),
        ("gpu-bind", slurm.gpu_bind),
    ):
        if value:
            field = f"launch.slurm.{name.replace('-', '_')}"
            lines.append(sbatch_option(name, value, field, source))
    if slurm.exclusive:
        lines.append(sbatch_option("exclusive", None, "launch.slurm.exclusive", source))
    if slurm.requeue:
        lines.append(sbatch_option("requeue", None, "launch.slurm.requeue", source))
        signal = f"B:USR1@{slurm.requeue}"
        lines.append(sbatch_option("signal", signal, "launch.slurm.requeue", source))
        # the requeued job (the same id) writes the same files: after the first run's lines
        lines.append(sbatch_option("open-mode", "append", "launch.slurm.requeue", source))
    lines.append(sbatch_option("output", "%x-%j.out", "builder"))
    for index, item in enumerate(slurm.extra):
        lines.append(
            _extra_option(
                item, f"launch.slurm.extra[{index}]", source, memory=slurm.mem is not None
            )
        )
    problems += _layout_problems(resolved, tasks)
    if problems:
        raise SpecError(source or "builder", problems)
    return lines


def task_cpus(resolved: Resolved, tasks: int) -> int:
    """The CPUs of each of a node's tasks (srun's and #SBATCH's --cpus-per-task): the
    node's CPUs for the run (cpus_per_node) split among its tasks, or cpus_per_task."""
    cpus, problems = _cpus(resolved, tasks)
    if problems or cpus is None:
        raise SpecError(resolved.stack.source or "builder", problems)
    return cpus


def _cpus(resolved: Resolved, tasks: int) -> tuple[int | None, list[Problem]]:
    launch = resolved.spec.launch
    slurm = launch.section(Slurm)
    if slurm.cpus_per_node and slurm.cpus_per_task:
        why = (
            "set cpus_per_node (the node's CPUs for the run) or cpus_per_task (each Slurm "
            "task's), not both: they say the same thing two ways"
        )
        return None, [Problem("launch.slurm.cpus_per_task", why)]
    if slurm.cpus_per_task:
        return slurm.cpus_per_task, []
    if not slurm.cpus_per_node:
        return None, [Problem("launch.slurm.cpus_per_node", CPUS_ADVICE.format(slots=launch.slots))]
    if slurm.cpus_per_node % tasks:
        launcher = resolved.launcher.name
        why = (
            f"{slurm.cpus_per_node} CPUs do not split evenly among the node's {tasks} tasks "
            f"({launcher} runs one per rank): use a multiple of {tasks}"
        )
        return None, [Problem("launch.slurm.cpus_per_node", why)]
    return slurm.cpus_per_node // tasks, []


def _extra_option(item: str, field: str, source: str, *, memory: bool = False) -> str:
    """One option of launch.slurm.extra (--name or --name=value, as sbatch reads it), unless
    builder sets it itself (then its field is named), however sbatch spells it (an alias,
    a unique start); memory: launch.slurm.mem is set, which sbatch's other memory
    options contradict."""
    if not item.startswith("--"):
        message = (
            f"{item!r}: write the option in sbatch's long form, --name or --name=value "
            "(e.g. --mail-type=END)"
        )
        raise SpecError(source or "builder", [Problem(field, message)])
    option, sep, value = item.removeprefix("--").partition("=")
    owner = _owner(option)
    if owner is not None:
        spelled = "" if owner == option else f" (sbatch reads --{option} as --{owner})"
        message = (
            f"--{option}{spelled} is one builder writes itself (from {OWNED[owner]}): set it "
            "there; a second one would silently win or lose"
        )
        raise SpecError(source or "builder", [Problem(field, message)])
    if memory and sbatch_reads(option, MEMORY_PER):
        message = (
            f"--{option} asks for memory another way than launch.slurm.mem "
            "(#SBATCH --mem), and sbatch refuses the two together: keep one"
        )
        raise SpecError(source or "builder", [Problem(field, message)])
    return sbatch_option(option, value if sep else None, field, source)


def _layout_problems(resolved: Resolved, tasks: int) -> list[Problem]:
    """GPU layout fields that contradict the node's GPUs and its tasks, or the device
    each rank takes."""
    launch = resolved.spec.launch
    slurm = launch.section(Slurm)
    bound = [
        (f"launch.slurm.{name}", value)
        for name, value in (("gpus_per_task", slurm.gpus_per_task), ("gpu_bind", slurm.gpu_bind))
        if value is not None and value != "none"
    ]
    if tasks > 1 and bound:
        field, value = bound[0]
        return [
            Problem(
                field,
                f"{value!r} binds each task to its own GPU(s), which it then sees from "
                f"device 0, while each of the node's {tasks} tasks is one rank whose "
                "LOCAL_RANK (SLURM_LOCALID) counts 0.."
                f"{tasks - 1}: torch.cuda.set_device(LOCAL_RANK) fails on every local rank "
                "but the first (NVIDIA/pyxis#73). Leave gpus_per_task and gpu_bind unset: "
                "each rank then sees the node's GPUs and takes the one LOCAL_RANK names",
            )
        ]
    if slurm.gpus_per_task is None:
        return []
    gpus = slurm.gpus_per_node if slurm.gpus_per_node is not None else launch.slots
    if slurm.gpus_per_task * tasks == gpus:
        return []
    launcher = resolved.launcher.name
    return [
        Problem(
            "launch.slurm.gpus_per_task",
            f"{slurm.gpus_per_task} GPU(s) per task times {tasks} task(s) per node "
            f"({launcher} runs {tasks} on each) is not the node's {gpus} GPU(s) "
            f"(launch.slurm.gpus_per_node, default launch.slots): set gpus_per_task to "
            f"{gpus // tasks if tasks and gpus % tasks == 0 else 'a divisor of them'}, or "
            "leave it unset",
        )
    ]


def _assignment(name: str, value: str) -> str:
    """NAME=value for an export line: the name checked, the value quoted."""
    if not re.fullmatch(ENV_NAME, name):
        raise UsageError(f"{name!r} is not a valid environment variable name")
    return f"{name}={shell_word(value)}"


def _comment(text: str) -> str:
    """Text for a '#' line of the script: a line break would start a shell line."""
    if any(c in text for c in "\n\r\0"):
        raise UsageError(f"{text!r}: a line of the job script's comments holds a line break")
    return text


def _readme(resolved: Resolved, image: str, run_folder: RunFolder, spec_ref: str) -> str:
    """The run folder's README: what is in it and the commands from here to the run."""
    spec, run, launcher = resolved.spec, resolved.runtime, resolved.launcher
    launch = spec.launch
    here = run_folder.nodes
    logs = launch.logs or f"{here}/{JOB_LOGS}"
    nodes = len(hosts_from_nodes(launch.nodes, launch.slots))
    folder = shlex.quote(here)
    local = str(run_folder.here.resolve())  # this machine's, where these commands run
    given = shlex.quote(local)
    again = f" --node-dir {folder}" if run_folder.named else ""
    copy = (
        f"\n   (e.g. `{rsync_to(local, 'LOGIN', here)}`, LOGIN a machine of the cluster)"
        if run_folder.elsewhere
        else " (this machine's path of it)"
    )
    shipped = ship_command(resolved, spec_ref=spec_ref, image=image)
    if shipped and run.pulls and not spec.launch.squashfs:
        ship = (
            f"`{shipped}`: every node pulls the image from its registry (pinned by the "
            "digest push records)"
        )
    elif shipped:
        ship = f"`{shipped}` (the file every node reads)"
    elif run.pulls and run.runs_image and not spec.launch.squashfs:
        ship = "every node pulls it by that digest"
    else:
        ship = run.not_shipped or "the nodes run the image as it is"
    secrets = (
        "- `secrets.env`, `secrets.sh` (0600): launch.env's secret values, read by each "
        "node's task; they appear nowhere else.\n"
        if secret_files(spec)
        else ""
    )
    return f"""# Slurm run: {spec.name}

Image `{image}`, {launcher.name} in {run.name}, {nodes} node(s) with {launch.slots}
rank(s) each, as one batch job (`{SCRIPT}`).

## From here to the run

1. {build_step(resolved, spec_ref=spec_ref, image=image)}
2. Put it where the nodes run it: {ship}.
3. Put this folder on storage every node sees, at {here}{copy}:
   the job script names that path, and each node's task checks for it before it
   starts.
4. Submit the job from a login node: `sbatch {folder}/{SCRIPT}`.
   Watch it: `squeue --me`; each node's output: `{logs}/JOBID/NODE.out`.
   Stop it: `scancel JOBID` (srun stops every node's task).

`builder bundle {spec_ref} --scheduler slurm -o {given}{again}` writes this folder again
after a change to the stack; files you changed by hand are refused, not replaced.

## What is in it

- `{SCRIPT}`: the batch job: #SBATCH options from launch.slurm, then one srun
  whose every task is {launcher.batch_task}.
{secrets}- `{RECORD}`: what builder wrote here, so that a new run folder replaces
  only its own files.
"""

"""What every scheduler says about itself: the protocol the ssh bundle, the Slurm batch
job and the Kubernetes manifests share.

A scheduler is one module in this package holding one ``Scheduler`` instance named
``SCHEDULER``, as torchx's schedulers do (``submit_dryrun`` / ``materialize``): it
takes the resolved stack, the image and the run folder, and returns the whole folder
of a run for its site as data (the job file, every file that file reads, a README
with the next commands), refusing what it cannot run; ``write`` puts that folder on
disk, all or nothing, the same way for every site. It says how a run is started and
stopped, for the README and the user. `builder bundle --scheduler NAME` reaches any
scheduler through this protocol alone.

It owns the rest of what is particular to its site: its section of the spec
(``section``: launch.slurm), and its preflight: the probe as the site's own job
(``preflight``), what the probe's saved output must show there (``probe_expected``),
and which of `builder preflight`'s options it takes (``check_probe``).
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from builder.cluster.folder import NODE_DIR, check_rewrite, write_cluster_files
from builder.errors import UsageError
from builder.image.pin import of_spec
from builder.output import check_private

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from builder.cluster.folder import RunFolder
    from builder.output import OutputFile
    from builder.preflight.probe import ProbeOutput, ProbeRequest
    from builder.preflight.report import Expected, Preflight
    from builder.resolved import Resolved
    from builder.spec.records import LaunchSpec

ProbeWrites = Literal["folder", "file"]
"""What `builder preflight --dry-run -o` names for a site whose probe is a job it writes."""


class Scheduler(ABC):
    """One way of starting the run on the nodes."""

    name: ClassVar[str]
    batch: ClassVar[bool] = False
    """Its nodes each run one task of a batch job (Slurm), not what launch.sh starts."""
    started: ClassVar[str]
    """How a run is started from what materialize made."""
    stopped: ClassVar[str]
    """How a run is stopped on every node."""
    section: ClassVar[type[Any] | None] = None
    """The record of its own options (a frozen dataclass of ``model.field``s), which the
    spec takes as launch.<name> (launch.slurm); None: it has none."""
    rehearsed: ClassVar[bool] = False
    """`builder rehearse` and `preflight --rehearse` run it on containers here."""
    probe_writes: ClassVar[ProbeWrites | None] = None
    """Its probe is a job builder writes (--dry-run -o FOLDER or FILE) for the user to
    submit; None: builder runs the probe on the nodes itself."""
    batch_launcher: ClassVar[str | None] = None
    """The launcher its batch task runs where the spec's cannot run in one (named, never
    picked by sort order): a rehearsal runs it in the spec's place."""
    nodes_read_folder: ClassVar[bool] = True
    """Its nodes read the run's folder (bound into the containers, named in the job):
    its files name the path they see it at (--node-dir). False: only this machine reads
    it (kubectl apply), and --node-dir is refused."""
    environment_files: ClassVar[tuple[str, ...]] = ()
    """The files of its folder that carry the run's environment: with a command's --set
    values they hold more than the spec, so they are not recorded as the spec's own (a
    later folder without the same values refuses to drop them, unless forced)."""

    def runtime_of(self, launch: LaunchSpec) -> str:
        """The runtime a run gets when the command names none."""
        return launch.runtime

    @abstractmethod
    def materialize(
        self,
        resolved: Resolved,
        *,
        image: str,
        folder: RunFolder,
        force: bool = False,
        spec_ref: str = "stack.yaml",
    ) -> list[OutputFile]:
        """Every file of the run's folder for this site, as data; nothing is written (a
        dry run). folder: where it is here (what an earlier run kept is read there) and
        the path its nodes see it at (what every file they read names); force: what is
        kept from an earlier run (keys) may be made anew; spec_ref: how the README's
        commands name the spec."""

    def write(
        self,
        resolved: Resolved,
        folder: RunFolder,
        *,
        image: str,
        force: bool = False,
        spec_ref: str = "stack.yaml",
        settings: bool = False,
    ) -> list[Path]:
        """Write the run's folder: everything prepared first (keys included) and written in
        one call, so a refusal writes nothing.

        A folder made here is 0700; an existing one keeps its mode and owner, and is
        refused if other users may enter it (a run's folder holds keys or secrets). A
        file there that builder wrote for this stack and nobody changed since is
        rewritten without force (``cluster.folder``). settings: the run carries a
        command's --set values (its environment_files are then not recorded). A path the
        nodes see that was named (--node-dir) is recorded, for the commands that read the
        folder later.
        """
        directory = folder.here
        check_private(directory)
        files = self.materialize(
            resolved, image=image, folder=folder, force=force, spec_ref=spec_ref
        )
        stack = resolved.spec.name
        if not force:
            check_rewrite(files, directory, stack=stack)
        recorded = [f.path for f in files if not (settings and f.path in self.environment_files)]
        nodes = folder.nodes if folder.named and self.nodes_read_folder else None
        return write_cluster_files(
            files, directory, force=True, secret=True, recorded=recorded, stack=stack, nodes=nodes
        )

    def next_commands(
        self,
        resolved: Resolved,
        written: Sequence[Path],
        *,
        spec_ref: str,
        image: str,
        nodes: str | None = None,
    ) -> tuple[str, ...]:
        """The exact commands that come after writing these files for this site (paths
        here as the command was given them; nodes: the path the nodes see their folder
        at, when they read one): the image built and put where the nodes get it, then
        the run started. The writing command prints them; nothing written: none."""
        if not written:
            return ()
        return (
            *image_commands(resolved, spec_ref=spec_ref, image=image),
            *self.start_commands(resolved, written, nodes),
        )

    def image_warnings(self, image: str) -> tuple[str, ...]:  # noqa: ARG002
        """What this site's nodes would get wrong about the image (said, not refused)."""
        return ()

    def check_folder(self, resolved: Resolved, folder: Path) -> None:  # noqa: ARG002
        """Refuse a run folder written for another run (other nodes) that a command
        would read beside the spec (UsageError); a site without one checks nothing."""
        return

    def start_commands(
        self,
        resolved: Resolved,  # noqa: ARG002 - a site's own
        written: Sequence[Path],  # noqa: ARG002
        nodes: str | None,  # noqa: ARG002
    ) -> tuple[str, ...]:
        """The commands that start the run from the files written (``next_commands``;
        nodes: the path the nodes see the folder at)."""
        return ()

    def check_node_dir(self, node_dir: str | None) -> None:
        """Refuse --node-dir for a site whose nodes never read the run's folder."""
        if node_dir is not None and not self.nodes_read_folder:
            raise UsageError(
                f"{NODE_DIR} names where the nodes see the run's folder; a {self.name} "
                "run's folder is read here only (its files are applied from this machine): "
                f"leave out {NODE_DIR}",
                field=NODE_DIR,
                value=node_dir,
            )

    # -- preflight ----------------------------------------------------------

    def check_probe(self, request: ProbeRequest) -> None:  # noqa: ARG002 - none taken
        """Refuse what `builder preflight` was given that this site does not take: an
        option of another site is refused, never ignored."""
        raise UsageError(f"--scheduler {self.name} has no preflight yet", field="--scheduler")

    def probe_expected(
        self,
        resolved: Resolved,  # noqa: ARG002
        request: ProbeRequest,  # noqa: ARG002
    ) -> Expected:
        """What the probe's reports must show when it ran on this site (its nodes, in
        the order the run's ranks are on them)."""
        raise UsageError(f"--scheduler {self.name} has no preflight yet", field="--scheduler")

    def preflight(
        self,
        resolved: Resolved,  # noqa: ARG002 - a site without a preflight reads nothing
        request: ProbeRequest,  # noqa: ARG002
        *,
        say: Callable[[str], None],  # noqa: ARG002
    ) -> Preflight | ProbeOutput:
        """The probe on this site: run and judged (a Preflight), or its job written or
        printed for the user to submit (a ProbeOutput)."""
        raise UsageError(f"--scheduler {self.name} has no preflight yet", field="--scheduler")


def build_command(resolved: Resolved, *, spec_ref: str, image: str) -> str | None:
    """`builder build` of the image the run names: the spec's, or another one (--image)
    under its own name; None for another one pinned by a digest (a registry holds it,
    nothing here can build those bytes)."""
    if of_spec(resolved.spec, image):
        return f"builder build {spec_ref}"
    return None if "@" in image else f"builder build {spec_ref} -t {shlex.quote(image)}"


def build_step(resolved: Resolved, *, spec_ref: str, image: str) -> str:
    """A README's first step: the build, or why there is none."""
    build = build_command(resolved, spec_ref=spec_ref, image=image)
    if build is None:
        return "The image is pinned by its digest: a registry holds it, nothing to build."
    return f"Build the image: `{build}`."


def image_words(resolved: Resolved, image: str) -> str:
    """What `builder push` and `ship` are told of the image: nothing for the spec's own,
    else --image."""
    return "" if of_spec(resolved.spec, image) else f" --image {shlex.quote(image)}"


def ship_command(resolved: Resolved, *, spec_ref: str, image: str) -> str | None:
    """What puts the image where the runtime's nodes get it: the file they read made (a
    SIF, a squashfs named by the spec), or the image pushed to its registry; None when
    nothing does (a runtime without an image, one that reads a file the spec does not
    name, an image given pinned by a digest: a registry holds it already)."""
    run = resolved.runtime
    if not run.runs_image:
        return None
    found = run.node_file(resolved.spec, image)
    if found is not None and found.path is not None:
        return f"{found.maker} {shlex.quote(image)} -o {shlex.quote(found.path)}"
    if not run.pulls or build_command(resolved, spec_ref=spec_ref, image=image) is None:
        return None
    return f"builder push {spec_ref}{image_words(resolved, image)}"


def image_commands(resolved: Resolved, *, spec_ref: str, image: str) -> tuple[str, ...]:
    """The image built, then put where the runtime's nodes get it (``ship_command``)."""
    if not resolved.runtime.runs_image:
        return ()
    build = build_command(resolved, spec_ref=spec_ref, image=image)
    ship = ship_command(resolved, spec_ref=spec_ref, image=image)
    return tuple(command for command in (build, ship) if command)


def remote(argv: Sequence[str]) -> str:
    """argv as ssh's remote command: ssh joins its words with spaces for the node's
    shell to split again, so words that need quoting are quoted twice."""
    line = shlex.join(argv)
    return line if line == " ".join(argv) else shlex.quote(line)


def rsync_to(here: str, node: str, there: str) -> str:
    """rsync of the folder here to there on node; -s (--protect-args) where the path
    would otherwise be split by the node's shell."""
    protect = "s" if shlex.quote(there) != there else ""
    return f"rsync -a{protect} {shlex.quote(here)}/ {node}:{shlex.quote(there)}/"


SHOWN_NODES = 4
"""A per-node next command is shown for this many nodes, then said for the rest."""


def each(nodes: Sequence[str], command: Callable[[str], str]) -> tuple[str, ...]:
    """command for each node, the first SHOWN_NODES of them and a line for the rest."""
    shown = tuple(command(node) for node in nodes[:SHOWN_NODES])
    rest = len(nodes) - SHOWN_NODES
    return (*shown, f"# ... the same for the other {rest} nodes") if rest > 0 else shown


def check_job_probe(scheduler: Scheduler, request: ProbeRequest) -> None:
    """What every site whose probe is a job it writes refuses: the ssh nodes' options, and
    the job's own options where no job is written."""
    if request.cluster_dir is not None or request.ssh_config is not None:
        option = "--cluster-dir" if request.cluster_dir is not None else "--ssh-config"
        raise UsageError(
            f"{option} is for the nodes over ssh; a {scheduler.name} job's nodes are the "
            "scheduler's",
            field=option,
        )
    scheduler.check_node_dir(request.node_dir)
    if request.node_dir is not None and request.output is None:
        raise UsageError(
            f"{NODE_DIR} names where the nodes see the folder --dry-run -o writes; give -o",
            field=NODE_DIR,
        )
    if (request.from_log or request.rehearse) and (request.output is not None or request.force):
        raise UsageError("--output and --force write the probe's job (--dry-run)")
    if request.rehearse and not scheduler.rehearsed:
        raise UsageError(
            f"--rehearse runs containers here; leave out --scheduler {scheduler.name}",
            field="--rehearse",
        )


def refuse_job_kind(scheduler: Scheduler, request: ProbeRequest) -> None:
    """--job chooses a Kubernetes job's kind; refused elsewhere."""
    if request.job is not None:
        raise UsageError(
            f"--job is for --scheduler kubernetes (the job's kind); --scheduler "
            f"{scheduler.name} has none",
            field="--job",
        )

"""Which setting reaches the ranks on which site: read off the schedulers themselves.

One spec is one run, whether it starts over ssh, under Slurm or on Kubernetes. For
each site (a scheduler with its runtime, launcher or job kind) and each setting of the
spec or of the run commands, ``parity_table`` sets that setting to a value found
nowhere else, asks the site's own scheduler for the run's folder
(``Scheduler.materialize``, a dry run) and looks for the value in what it returns:

- **carried**: the value is in the files the site runs (a secret: only in its 0600
  files, nowhere else);
- **refused**: the scheduler said no, and why (what the user reads);
- **dropped**: neither, the one outcome that must never happen (tests/unit/test_parity.py
  fails on it, and the documentation's table, generated from this at every build,
  would show it).

Nothing here knows how a site carries a setting: the table is what the schedulers do.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from builder.cluster.folder import RunFolder
from builder.errors import BuilderError, SpecError
from builder.resolved import resolve
from builder.spec.loader import spec_from_dict
from builder.spec.presets import preset_text

if TYPE_CHECKING:
    from collections.abc import Callable

    from builder.output import OutputFile

IMAGE = "registry.example.com/team/parity:1"
"""The image every site runs (pyxis pulls by reference: a registry is named)."""
FOLDER = Path("/shared/parity-run")
"""The run folder, as the nodes would see it (never written: materialize is a dry run)."""
BASE = "cpu-deepspeed"
"""The preset each probe starts from: it needs no accelerator."""
SECRET_MODE = 0o600


@dataclass(frozen=True)
class Site:
    """Where a run starts: a scheduler, with its runtime (or job kind) and launcher."""

    title: str
    scheduler: str
    launcher: str
    runtime: str | None = None
    job: str | None = None


@dataclass(frozen=True)
class Setting:
    """One setting: how a probe sets it (on the spec's data, or as --set) and what in a
    site's files shows that it arrived."""

    name: str
    what: str
    found: str
    """A pattern over the folder's files that only the setting's value matches."""
    launch: dict[str, Any] | None = None
    """Keys of the spec's launch section it sets."""
    settings: dict[str, str] | None = None
    """A run command's --set values."""
    secret: bool = False
    """Carried only if it is in the 0600 files, and nowhere else."""


@dataclass(frozen=True)
class Cell:
    """What one site does with one setting."""

    outcome: str
    """carried, refused or dropped."""
    detail: str = ""
    """carried: the files it is in; refused: the scheduler's reason."""


SITES = (
    Site("ssh, docker", "ssh", "torchrun", runtime="docker"),
    Site("ssh, docker, deepspeed", "ssh", "deepspeed", runtime="docker"),
    Site("ssh, apptainer", "ssh", "torchrun", runtime="apptainer"),
    Site("ssh, none", "ssh", "torchrun", runtime="none"),
    Site("Slurm, apptainer", "slurm", "torchrun", runtime="apptainer"),
    Site("Slurm, apptainer, deepspeed", "slurm", "deepspeed", runtime="apptainer"),
    Site("Slurm, pyxis", "slurm", "torchrun", runtime="pyxis"),
    Site("Slurm, none", "slurm", "torchrun", runtime="none"),
    Site("Slurm, srun", "slurm", "srun", runtime="apptainer"),
    Site("Kubernetes, TrainJob", "kubernetes", "torchrun", job="trainjob"),
    Site("Kubernetes, TrainJob, deepspeed", "kubernetes", "deepspeed", job="trainjob"),
    Site("Kubernetes, PyTorchJob", "kubernetes", "torchrun", job="pytorchjob"),
)
"""Every site builder writes for, each with the launcher it runs there."""

SETTINGS = (
    Setting(
        "launch.env",
        "a variable every rank gets",
        r"parity-env-value",
        launch={"env": {"PARITY_ENV": "parity-env-value"}},
    ),
    Setting(
        "launch.env (secret)",
        "a secret variable: only in the run folder's 0600 files",
        r"parity-secret-value",
        launch={"env": {"PARITY_TOKEN": "parity-secret-value"}},
        secret=True,
    ),
    Setting(
        "--set",
        "a run command's NAME=VALUE",
        r"parity-set-value",
        settings={"PARITY_SET": "parity-set-value"},
    ),
    Setting(
        "launch.restarts",
        "restarts of every rank after a failure",
        r"max[-_]restarts\W+7\b|backoffLimit\W+7\b",
        launch={"restarts": 7},
    ),
    Setting(
        "launch.min_nodes",
        "the run goes on with fewer nodes",
        r"nnodes\W+1:|minNodes|min_nodes\W+1\b",
        launch={"min_nodes": 1},
    ),
    Setting(
        "launch.rendezvous_timeout",
        "how long nodes wait for each other",
        r"join_timeout=901\b",
        launch={"rendezvous_timeout": 901},
    ),
    Setting(
        "launch.node_timeout",
        "how soon an elastic run gives a silent node up",
        r"keep_alive_interval=11\b",
        launch={"min_nodes": 1, "node_timeout": 33},
    ),
    Setting(
        "launch.last_call",
        "how long an elastic rendezvous waits for more nodes",
        r"last_call_timeout=17\b",
        launch={"min_nodes": 1, "last_call": 17},
    ),
    Setting(
        "launch.master_port",
        "the rendezvous port",
        r"\b29577\b",
        launch={"master_port": 29577},
    ),
    Setting(
        "launch.code",
        "the training code, at image.workdir",
        r"/shared/parity-code|claimName\W+\S+-code\b",
        launch={"code": "/shared/parity-code"},
    ),
    Setting(
        "launch.cache",
        "caches, at their own path",
        r"/shared/parity-cache",
        launch={"cache": "/shared/parity-cache"},
    ),
    Setting(
        "launch.checkpoints",
        "checkpoints, at their own path",
        r"/shared/parity-ckpt",
        launch={"checkpoints": "/shared/parity-ckpt"},
    ),
    Setting(
        "launch.logs",
        "each rank's logs, at their own path",
        r"/shared/parity-logs",
        launch={"logs": "/shared/parity-logs"},
    ),
    Setting(
        "launch.mounts",
        "a host folder in every rank's view",
        r"/shared/parity-data",
        launch={"mounts": [{"source": "/shared/parity-data", "target": "/parity-data"}]},
    ),
    Setting(
        "launch.socket_ifname",
        "the nodes' interface for the collectives",
        r"SOCKET_IFNAME\W+pty7\b",
        launch={"socket_ifname": "pty7"},
    ),
    Setting(
        "launch.node_slots",
        "a node of another size (here node2 runs 1 rank, node1 2)",
        r"node2 slots=1\b|nproc-per-node\W+1\b",
        launch={"slots": 2, "node_slots": {"node2": 1}},
    ),
    Setting(
        "launch.args",
        "the script's arguments",
        r"--parity-arg",
        launch={"args": ["--parity-arg", "1"]},
    ),
)
"""The settings every site must carry or refuse: the spec's and the run commands'."""


def parity_table(
    sites: tuple[Site, ...] = SITES, settings: tuple[Setting, ...] = SETTINGS
) -> dict[str, dict[str, Cell]]:
    """setting name -> site title -> what the site's scheduler does with it."""
    return {s.name: {site.title: probe(site, s) for site in sites} for s in settings}


def probe(site: Site, setting: Setting) -> Cell:
    """The site's run folder with setting set, and whether the value is in it."""
    data = _site_data(site)
    data["launch"] = _merged(data["launch"], setting.launch or {})
    try:
        files = _folder(site, data, setting.settings or {})
    except SpecError as error:  # the problems, without the probe's own source name
        return Cell("refused", "; ".join(f"{p.path}: {p.message}" for p in error.problems))
    except BuilderError as error:
        return Cell("refused", " ".join(str(error).split()))
    found = re.compile(setting.found)
    holding = [f for f in files if found.search(f.text)]
    if setting.secret:
        shown = [f.path for f in holding if f.mode != SECRET_MODE]
        if shown:
            return Cell("dropped", f"shown in {', '.join(shown)}")
    if not holding:
        return Cell("dropped")
    return Cell("carried", ", ".join(f.path for f in holding))


def _folder(site: Site, data: dict[str, Any], settings: dict[str, str]) -> list[OutputFile]:
    stack = spec_from_dict(data, f"{BASE} for {site.title}")
    resolved = resolve(
        stack,
        runtime_name=site.runtime,
        launcher_name=site.launcher,
        scheduler_name=site.scheduler,
    ).with_settings(settings)
    return resolved.scheduler.materialize(
        resolved, image=IMAGE, folder=RunFolder(FOLDER, str(FOLDER))
    )


def _site_data(site: Site) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(preset_text(BASE))
    data["launch"]["launcher"] = site.launcher
    data["launch"].pop("socket_ifname", None)  # set only by its own probe
    if site.job is not None:
        data["launch"]["kubernetes"] = {"job": site.job}
    return data


def _merged(launch: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(launch)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def parity_markdown(
    table: dict[str, dict[str, Cell]] | None = None,
    describe: Callable[[str], str] | None = None,
) -> str:
    """The table as markdown: a row per setting, a column per site; carried (the files),
    refused (the reason, in full below the table), or DROPPED."""
    table = parity_table() if table is None else table
    sites = list(next(iter(table.values())))
    what = {s.name: s.what for s in SETTINGS}
    lines = [
        "| setting | " + " | ".join(sites) + " |",
        "|---|" + "---|" * len(sites),
    ]
    reasons: dict[str, int] = {}  # the same reason on several sites is written once
    for name, row in table.items():
        cells = []
        for cell in row.values():
            if cell.outcome == "refused":
                number = reasons.setdefault(" ".join(cell.detail.split()), len(reasons) + 1)
                cells.append(f"refused ({number})")
            elif cell.outcome == "carried":
                cells.append("yes")
            else:
                cells.append("**DROPPED**")
        label = describe(name) if describe else what.get(name, "")
        lines.append(f"| `{name}`: {label} | " + " | ".join(cells) + " |")
    if reasons:
        lines += ["", "Why a site refuses:", ""]
        lines += [f"{number}. {text.replace('|', '/')}" for text, number in reasons.items()]
    return "\n".join(lines) + "\n"

"""Hostile inputs for --node-dir, where the nodes see the run's folder (appended to the
corpus's CASES).

Every command that names the folder to the nodes takes it (bundle, launch, slurm,
preflight) and checks it as one side of a bind, the same check as the folder's own
path: absolute, no ':' or ',' (docker -v and apptainer --bind split there), no line
break or '..'. A site whose nodes never read the folder (kubernetes), and a rehearsal,
refuse it. Nothing is written on a refusal (the corpus checks the folder stays empty).
"""

from __future__ import annotations

from tests.hostile.corpus import MEGA, USAGE, case

COMMANDS = (
    ("bundle", ("bundle", "--preset", "cpu-deepspeed", "-o", "c")),
    ("launch", ("launch", "--preset", "cpu-deepspeed")),
    ("slurm", ("slurm", "--preset", "cpu-deepspeed")),
    ("preflight", ("preflight", "--preset", "cpu-deepspeed", "--dry-run")),
)
for command, args in COMMANDS:
    for name, value in (
        ("relative", "shared/c"),
        ("dot", "./c"),
        ("colon", "/shared/a:b"),
        ("comma", "/shared/a,b"),
        ("newline", "/shared/a\nb"),
        ("dot-dot", "/shared/../c"),
        ("empty", ""),
        ("huge", "/" + MEGA),
        ("tab", "/shared/a\tb"),
    ):
        case(f"{command}-node-dir-{name}", (*args, "--node-dir", value), USAGE, "--node-dir")

for name, line in (
    ("kubernetes-bundle", "bundle --preset cpu-deepspeed --scheduler kubernetes -o k"),
    ("kubernetes-preflight", "preflight --preset cpu-deepspeed --scheduler kubernetes --dry-run"),
    ("rehearse-preflight", "preflight --preset cpu-deepspeed --rehearse"),
    ("slurm-preflight-no-output", "preflight --preset cpu-deepspeed --scheduler slurm --dry-run"),
    ("from-log", "preflight --preset cpu-deepspeed --from-log probe.log"),
    ("from-log-slurm", "preflight --preset cpu-deepspeed --scheduler slurm --from-log probe.log"),
):
    case(f"node-dir-{name}", (*line.split(), "--node-dir", "/shared/c"), USAGE, "--node-dir")

# srun reads the logs folder under it as a filename pattern: '%' is refused naming the option
# that gave the path (the Slurm job is the only destination that reads it so)
for name, writer in (
    ("slurm", ("slurm", "--preset", "cpu-deepspeed")),
    ("bundle-slurm", ("bundle", "--preset", "cpu-deepspeed", "--scheduler", "slurm", "-o", "c")),
):
    case(f"{name}-node-dir-percent", (*writer, "--node-dir", "/shared/a%N"), USAGE, "--node-dir")

"""Hostile inputs for runtime pyxis and `builder squashfs` (appended to the corpus's CASES).

What pyxis and enroot would misread is refused before anything is written: an image
enroot cannot pull (no registry, an uppercase repository), a squashfs path that is
not one absolute file, a bind path that enroot's bash configuration would expand
or split, and pyxis in an ssh plan, which srun never starts.
"""

from __future__ import annotations

from tests.hostile.corpus import SPEC, USAGE, case, spec

PYXIS = "launcher: torchrun\nslurm: {cpus_per_task: 4, runtime: pyxis}"
REGISTRY = ("--image", "registry.example.com/team/demo:1")
SQSH = "/shared/images/demo.sqsh"

# The image: enroot pulls from a registry, in its own grammar.
for name, image, says in (
    ("no-registry", None, "builder push"),
    ("no-registry-given", "team/demo:1", "launch.squashfs"),
    ("uppercase", "registry.example.com/Team/demo:1", "lowercase"),
    ("short-digest", "registry.example.com/team/demo@sha256:12ab", "sha256"),
):
    case(
        f"pyxis-image-{name}",
        ("slurm", "stack.yaml", *(("--image", image) if image else ())),
        USAGE,
        says,
        files={"stack.yaml": spec(launch=PYXIS)},
    )

# launch.squashfs: one absolute file, the same on every node.
for name, path, code, says in (
    ("relative", "demo.sqsh", SPEC, "launch.squashfs"),
    ("comma", '"/shared/a,b.sqsh"', SPEC, "launch.squashfs"),
    ("dot-dot", "/shared/../demo.sqsh", SPEC, "launch.squashfs"),
    ("newline", '"/shared/a\\nb.sqsh"', SPEC, "launch.squashfs"),
    ("a-sif", "/shared/images/demo.sif", SPEC, "launch.squashfs"),
    ("a-folder", "/shared/images/", SPEC, "launch.squashfs"),
):
    case(
        f"pyxis-squashfs-{name}",
        ("slurm", "stack.yaml"),
        code,
        says,
        files={"stack.yaml": spec(launch=f"{PYXIS}\nsquashfs: {path}")},
    )

# Bind paths: pyxis writes each into `echo "SRC DST FLAGS"` of enroot's bash config.
for name, launch, field in (
    ("code-blank", 'code: "/shared/my code"', "launch.code"),
    ("cache-dollar", 'cache: "/shared/$USER"', "launch.cache"),
    ("mount-backtick", 'mounts: [{source: "/d/`id`", target: /data}]', "launch.mounts[0].source"),
    ("mount-quote", "mounts: [{source: /data, target: '/da\"ta'}]", "launch.mounts[0].target"),
    ("mount-backslash", "mounts: [{source: '/da\\ta', target: /data}]", "launch.mounts[0].source"),
):
    case(
        f"pyxis-bind-{name}",
        ("slurm", "stack.yaml", *REGISTRY),
        USAGE,
        field,
        files={"stack.yaml": spec(launch=f"{PYXIS}\n{launch}")},
    )
case(
    "pyxis-cluster-dir-blank",
    ("slurm", "stack.yaml", *REGISTRY, "--cluster-dir", "my cluster"),
    USAGE,
    "--cluster-dir",
    files={"stack.yaml": spec(launch=f"{PYXIS}\nenv: {{HF_TOKEN: hf_x}}")},
)

# srun starts pyxis's container: an ssh plan cannot.
for command in (("launch", "stack.yaml"), ("bundle", "stack.yaml", "-o", "cluster")):
    case(
        f"pyxis-ssh-plan-{command[0]}",
        (*command, "--runtime", "pyxis"),
        USAGE,
        "builder slurm",
        files={"stack.yaml": spec(launch="launcher: torchrun")},
    )

# `builder squashfs IMAGE -o PATH`: the file launch.squashfs names.
for name, args, says in (
    ("no-output", ("demo:1",), "--output"),
    ("relative-output", ("demo:1", "-o", "demo.sqsh"), "--output"),
    ("sif-output", ("demo:1", "-o", "/shared/demo.sif"), "--output"),
    ("colon-output", ("demo:1", "-o", "/shared/a:b.sqsh"), "--output"),
    ("dash-output", ("demo:1", "-o", "-x.sqsh"), "--output"),
    ("uppercase", ("Team/demo:1", "-o", SQSH), "lowercase"),
    ("newline", ("demo:1\nid", "-o", SQSH), "IMAGE"),
    ("bad-digest", ("demo@sha256:xyz", "-o", SQSH), "sha256"),
):
    case(f"squashfs-{name}", ("squashfs", *args), USAGE, says)

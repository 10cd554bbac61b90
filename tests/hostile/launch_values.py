"""Hostile inputs, third round: launch values (appended to the corpus's CASES)."""

from __future__ import annotations

from tests.hostile.corpus import GOOD, SPEC, USAGE, case, spec

NONE_DS = "runtime: none\nnodes: [node1, node2]"

# Every path DeepSpeed's pdsh runner pastes into each node's shell line (`cd FOLDER;`,
# `source FILE;`) passes one check, wherever the plan is made.
for command in (("launch", "stack.yaml"), ("bundle", "stack.yaml", "-o", "cluster")):
    verb = command[0]
    for name, code in (
        ("semicolon", '"/x;touch /tmp/PWNED;cd /tmp"'),
        ("blank", '"/shared/my project"'),
        ("dollar", '"/shared/$(id)"'),
        ("backtick", '"/shared/`id`"'),
        ("ampersand", '"/shared/a&b"'),
    ):
        case(
            f"pdsh-code-{name}-{verb}",
            command,
            USAGE,
            "launch.code",
            files={"stack.yaml": spec(launch=f"{NONE_DS}\ncode: {code}")},
        )
case(
    "pdsh-secrets-cluster-blank",
    ("bundle", "stack.yaml", "--cluster-dir", "my cluster"),
    USAGE,
    "--cluster-dir",
    files={"stack.yaml": spec(launch=f"{NONE_DS}\nenv: {{HF_TOKEN: hf_x}}\ncode: /shared/code")},
)

# Every value that reaches a bind list (docker -v, apptainer --bind) passes one check.
BINDS = {
    "comma": '"/shared/data,/root"',
    "colon": '"/shared/data:/root"',
    "relative": "data",
    "dot-dot": "/shared/../etc",
    "dot": "/shared/./data",
    "tab": '"/shared/a\\tb"',
    "line-separator": '"/shared/a\\u2028b"',
}
for name, path in BINDS.items():
    case(
        f"mount-source-{name}",
        ("launch", "stack.yaml"),
        SPEC,
        "launch.mounts[0].source",
        files={"stack.yaml": spec(launch=f"mounts:\n  - {{source: {path}, target: /data}}")},
    )
    case(
        f"mount-target-{name}",
        ("bundle", "stack.yaml", "-o", "cluster"),
        SPEC,
        "launch.mounts[0].target",
        files={"stack.yaml": spec(launch=f"mounts:\n  - {{source: /data, target: {path}}}")},
    )
case(
    "code-comma",
    "launch stack.yaml",
    SPEC,
    "launch.code",
    files={"stack.yaml": spec(launch='code: "/shared/a,b"')},
)
case(
    "cache-relative",
    "launch stack.yaml",
    SPEC,
    "launch.cache",
    files={"stack.yaml": spec(launch="cache: cache")},
)
case(
    "docker-cluster-dir-colon",
    ("bundle", "stack.yaml", "--cluster-dir", "a:b"),
    USAGE,
    "--cluster-dir",
    files={"stack.yaml": GOOD},
)

# Binds that land on each other or on the image's own software.
for name, launch, field in (
    ("cache-over-opt", "cache: /opt", "launch.cache"),
    ("cache-over-venv", "cache: /opt/venv", "launch.cache"),
    ("cache-root", "cache: /", "launch.cache"),
    ("mount-over-usr", "mounts: [{source: /data, target: /usr}]", "launch.mounts[0].target"),
    ("mount-over-cluster", "mounts: [{source: /d, target: /etc/builder}]", "launch.mounts[0]"),
    ("cache-is-workdir", "code: /shared/code\ncache: /workspace", "launch.cache"),
    (
        "mount-twice",
        "mounts: [{source: /a, target: /data}, {source: /b, target: /data/}]",
        "launch.mounts[1].target",
    ),
    ("mount-on-workdir", "code: /c\nmounts: [{source: /a, target: /workspace}]", "mounts[0]"),
):
    case(
        f"bind-{name}", "launch stack.yaml", SPEC, field, files={"stack.yaml": spec(launch=launch)}
    )

# Secrets: never in the image, never echoed.
for name in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY", "DB_PASSWORD"):
    case(
        f"image-env-secret-{name}",
        "render stack.yaml",
        SPEC,
        "image.env",
        files={"stack.yaml": spec(image=f"env: {{{name}: s3cr3t}}")},
    )
case(
    "image-env-secret-lint",
    "lint stack.yaml",
    SPEC,
    "HF_TOKEN",
    files={"stack.yaml": spec(image="env: {HF_TOKEN: s3cr3t}")},
)
for name, value in (("bell", "\\a"), ("escape", "\\e[2J"), ("bidi", "\\u202e"), ("nel", "\\x85")):
    case(
        f"secret-value-{name}",
        "launch stack.yaml",
        SPEC,
        "launch.env.HF_TOKEN",
        files={"stack.yaml": spec(launch=f'env: {{HF_TOKEN: "hf_{value}x"}}')},
    )
for name, char in (
    ("rlo", "\\u202e"),
    ("lri", "\\u2066"),
    ("zero-width", "\\u200b"),
    ("bom", "\\ufeff"),
):
    case(
        f"env-value-{name}",
        "launch stack.yaml",
        SPEC,
        "launch.env.B",
        files={"stack.yaml": spec(launch=f'env: {{B: "a{char}b"}}')},
    )
    case(
        f"description-{name}",
        "render stack.yaml",
        SPEC,
        "description",
        files={"stack.yaml": GOOD + f'description: "a{char}b"\n'},
    )

# Ports, versions and accounts that parse but cannot work.
case(
    "master-port-is-ssh-port",
    "launch stack.yaml",
    SPEC,
    "launch.master_port",
    files={"stack.yaml": spec(launch="master_port: 3022")},
)
case(
    "master-port-is-own-ssh-port",
    "launch stack.yaml",
    SPEC,
    "launch.master_port",
    files={"stack.yaml": spec(image="ssh: {port: 2222}", launch="master_port: 2222")},
)
case(
    "ssh-port-22",
    "render stack.yaml",
    SPEC,
    "image.ssh.port",
    files={"stack.yaml": spec(image="ssh: {port: 22}")},
)
for name, value in (("true", "true"), ("float", "1.0"), ("string", '"1"')):
    case(
        f"version-{name}",
        "render stack.yaml",
        SPEC,
        "version",
        files={"stack.yaml": GOOD + f"version: {value}\n"},
    )
for name, user, field in (
    ("daemon", "{name: daemon, uid: 1}", "image.user"),
    ("nobody", "{name: nobody, uid: 5000}", "image.user.name"),
    ("ubuntu", "{name: ubuntu, uid: 5000}", "image.user.name"),
    ("system-uid", "{name: alice, uid: 999}", "image.user.uid"),
):
    case(
        f"user-{name}",
        "render stack.yaml",
        SPEC,
        field,
        files={"stack.yaml": spec(image=f"user: {user}")},
    )

# Slurm's layout: options builder writes itself, contradictions, the list form.
SLURM = "slurm: {cpus_per_task: 8, %s}"
for name, slurm, field in (
    ("extra-nodes", "extra: ['--nodes=4']", "launch.slurm.extra[0]"),
    ("extra-ntasks", "extra: ['--ntasks-per-node=8']", "launch.slurm.extra[0]"),
    ("extra-output", "extra: ['--output=/tmp/x']", "launch.slurm.extra[0]"),
    ("extra-exclusive", "extra: ['--exclusive']", "launch.slurm.extra[0]"),
    ("extra-gres", "extra: ['--gres=gpu:8']", "launch.slurm.extra[0]"),
    ("extra-short", "extra: ['-N4']", "launch.slurm.extra[0]"),
    ("extra-bare", "extra: ['exclusive']", "launch.slurm.extra[0]"),
    ("extra-blank", "extra: ['--comment=a b']", "launch.slurm.extra[0]"),
    ("extra-mapping", "extra: {exclusive: ''}", "launch.slurm.extra"),
    ("gpus-per-task-contradicts", "gpus_per_task: 3", "launch.slurm.gpus_per_task"),
    ("mem-words", "mem: lots", "launch.slurm.mem"),
    ("mem-number", "mem: 0", "launch.slurm.mem"),
    ("gpu-bind-shell", "gpu_bind: 'closest;id'", "launch.slurm.gpu_bind"),
    ("exclusive-string", "exclusive: 'yes'", "launch.slurm.exclusive"),
):
    case(
        f"slurm-{name}",
        ("slurm", "stack.yaml"),
        SPEC,
        field,
        files={"stack.yaml": spec(launch=f"slots: 2\n{SLURM % slurm}")},
    )
case(
    "launch-srun-launcher",
    "launch --preset cpu-deepspeed --launcher srun",
    USAGE,
    "--launcher",
)
case(
    "slurm-gaudi-spawn",
    ("slurm", "stack.yaml", "--launcher", "mpirun"),
    USAGE,
    "--launcher",
    files={"stack.yaml": spec(image="openmpi: true", launch=SLURM % "partition: p")},
)

# A restart policy: ranges, and launchers that have none.
for name, launch, field in (
    ("restarts-negative", "launcher: torchrun\nrestarts: -1", "launch.restarts"),
    ("restarts-huge", "launcher: torchrun\nrestarts: 1000", "launch.restarts"),
    ("restarts-string", "launcher: torchrun\nrestarts: '3'", "launch.restarts"),
    ("restarts-deepspeed", "restarts: 2", "launch.restarts"),
    ("min-nodes-zero", "launcher: torchrun\nmin_nodes: 0", "launch.min_nodes"),
    ("min-nodes-more", "launcher: torchrun\nmin_nodes: 3", "launch.min_nodes"),
    ("min-nodes-deepspeed", "min_nodes: 1", "launch.min_nodes"),
    (
        "rdzv-timeout-small",
        "launcher: torchrun\nrendezvous_timeout: 1",
        "launch.rendezvous_timeout",
    ),
    (
        "rdzv-timeout-float",
        "launcher: torchrun\nrendezvous_timeout: 1.5",
        "launch.rendezvous_timeout",
    ),
):
    case(
        f"policy-{name}",
        "launch stack.yaml",
        SPEC,
        field,
        files={"stack.yaml": spec(launch=launch)},
    )
case(
    "slurm-cluster-dir-percent",
    ("slurm", "stack.yaml", "--cluster-dir", "c%N"),
    USAGE,
    "--cluster-dir",
    files={"stack.yaml": spec(launch=SLURM % "partition: p")},
)

# --- CPU architectures and multi-node NVLink: each refused naming its field -------------
for name, image, field in (
    ("platforms-unknown", "platforms: [linux/riscv64]", "image.platforms"),
    ("platforms-newline", 'platforms: ["linux/arm64\\n"]', "image.platforms"),
    ("platforms-empty", "platforms: []", "image.platforms"),
    ("platforms-string", "platforms: linux/arm64", "image.platforms"),
    ("platforms-twice", "platforms: [linux/arm64, linux/arm64]", "image.platforms"),
    ("platforms-huge", f"platforms: [{'a' * 100_000}]", "image.platforms"),
):
    case(f"arch-{name}", "render stack.yaml", SPEC, field, files={"stack.yaml": spec(image)})
case(
    "arch-mnnvl-on-cpu",
    "launch stack.yaml",
    SPEC,
    "launch.mnnvl",
    files={"stack.yaml": spec(launch="mnnvl: true")},
)
case(
    "arch-mnnvl-string",
    "launch stack.yaml",
    SPEC,
    "launch.mnnvl",
    files={"stack.yaml": spec(launch="mnnvl: 'yes'")},
)
for name, entry in (
    ("no-equals", "linux/arm64"),
    ("unknown", "linux/s390x=debian:bookworm"),
    ("newline", "linux/arm64=debian:bookworm\n; id"),
    ("quote", "linux/arm64=deb'ian"),
    ("huge", "linux/arm64=" + "a" * 100_000),
):
    case(
        f"arch-platform-base-{name}",
        ("build", "stack.yaml", "--platform-base", entry),
        USAGE,
        "--platform-base",
        files={"stack.yaml": spec()},
    )

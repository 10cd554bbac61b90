"""Every command that writes a run's files ends with the exact commands that come next,
for that run and site: on stderr as `next: ...` lines (stdout stays the output's), and
in --json's result as "next"."""

from __future__ import annotations

import json
import math
import shlex
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.preflight.probe import Settings
from builder.schedulers.kubernetes.preflight import PULL_ALLOWANCE

if TYPE_CHECKING:
    from pathlib import Path


def said_next(*args: str) -> list[str]:
    """The `next:` lines of a successful run of the command."""
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return [line.removeprefix("next: ") for line in result.stderr.splitlines() if "next: " in line]


def test_init_and_render_say_lint_and_build(tmp_path: Path) -> None:
    spec = tmp_path / "my stack.yaml"
    assert said_next("init", "-p", "cpu-deepspeed", "-o", str(spec)) == [
        f"builder lint {shlex.quote(str(spec))}",
        f"builder build {shlex.quote(str(spec))}",
    ]
    rendered = said_next("render", str(spec), "-o", str(tmp_path / "out"))
    assert rendered == [f"builder build {shlex.quote(str(spec))}"]


def test_an_ssh_bundle_says_copy_each_node_then_launch(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    lines = said_next("bundle", "--preset", "cpu-deepspeed", "-o", str(folder))
    assert lines == [
        "builder build --preset cpu-deepspeed",
        "builder push --preset cpu-deepspeed",
        f"rsync -a {folder}/ node1:{folder}/",
        f"rsync -a {folder}/ node2:{folder}/",
        f"ssh node1 sh {folder}/launch.sh node1",
        f"ssh node2 sh {folder}/launch.sh node2",
        f"ssh node1 sh {folder}/launch.sh launch",
    ]
    # every arm named exists in the launch.sh it wrote
    script = (folder / "launch.sh").read_text()
    assert all(f"\n{arm})" in script for arm in ("node1", "node2", "launch"))


def test_torchrun_has_no_launch_arm_and_many_nodes_are_summed_up(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    nodes = ",".join(f"n{i}" for i in range(1, 7))
    spec = tmp_path / "stack.yaml"
    said_next("init", "-p", "cuda-torchrun", "-o", str(spec))
    text = spec.read_text().replace("nodes: [node1, node2]", f"nodes: [{nodes}]")
    spec.write_text(text)
    lines = said_next("bundle", str(spec), "-o", str(folder))
    assert not any(line.endswith("launch.sh launch") for line in lines)
    assert lines.count("# ... the same for the other 2 nodes") == 2
    assert f"ssh n4 sh {folder}/launch.sh n4" in lines


@pytest.mark.parametrize(
    ("runtime", "shipped"),
    [
        ("apptainer", "builder sif builder/cpu-deepspeed:latest -o cpu-deepspeed-latest.sif"),
        (
            "pyxis",
            "builder push --preset cpu-deepspeed --image registry.example.com/team/train:1.0",
        ),
        ("none", None),
    ],
)
def test_a_slurm_script_says_ship_then_sbatch(
    tmp_path: Path, runtime: str, shipped: str | None
) -> None:
    script = tmp_path / "job.sbatch"
    args = ["slurm", "--preset", "cpu-deepspeed", "--runtime", runtime, "-o", str(script)]
    if runtime == "pyxis":  # enroot pulls it: from a registry
        args += ["--image", "registry.example.com/team/train:1.0"]
    lines = said_next(*args)
    built = "builder build --preset cpu-deepspeed"
    if runtime == "pyxis":
        built += " -t registry.example.com/team/train:1.0"
    ships = [] if shipped is None else [built, shipped]
    assert lines == [*ships, f"sbatch {script}"]


def test_an_image_given_is_built_and_pushed_under_its_own_name(tmp_path: Path) -> None:
    image = "registry.example.com/team/train:1.0"
    lines = said_next("bundle", "-p", "cpu-deepspeed", "-o", str(tmp_path / "a"), "--image", image)
    assert lines[:2] == [
        f"builder build --preset cpu-deepspeed -t {image}",
        f"builder push --preset cpu-deepspeed --image {image}",
    ]
    # one pinned by a digest is in a registry already: nothing to build or push
    pinned = "registry.example.com/team/train@sha256:" + "a" * 64
    lines = said_next("bundle", "-p", "cpu-deepspeed", "-o", str(tmp_path / "b"), "--image", pinned)
    assert not any(line.startswith(("builder build", "builder push")) for line in lines)
    assert lines[0].startswith("rsync -a ")


@pytest.mark.parametrize("site", ["ssh", "slurm", "kubernetes"])
def test_each_readme_says_the_same_build_and_push_as_next(tmp_path: Path, site: str) -> None:
    image = "registry.example.com/team/train:1.0"
    for given, folder in ((image, tmp_path / "given"), (None, tmp_path / "own")):
        args = ["bundle", "-p", "cpu-deepspeed", "--scheduler", site, "-o", str(folder)]
        lines = said_next(*args, *(("--image", given) if given else ()))
        readme = (folder / "README.md").read_text()
        shown = {part for i, part in enumerate(readme.split("`")) if i % 2}
        for line in lines:
            if line.startswith(("builder build", "builder push")):
                assert line in shown, (line, readme)
    pinned = "registry.example.com/team/train@sha256:" + "b" * 64
    folder = tmp_path / "pinned"
    said_next(
        "bundle", "-p", "cpu-deepspeed", "--scheduler", site, "-o", str(folder), "--image", pinned
    )
    readme = (folder / "README.md").read_text()
    assert "builder build" not in readme
    assert "builder push" not in readme


def test_kubernetes_says_apply_secrets_first_and_json_carries_it(tmp_path: Path) -> None:
    manifests = tmp_path / "k8s.yaml"
    spec = tmp_path / "stack.yaml"
    said_next("init", "-p", "cpu-deepspeed", "-o", str(spec))
    text = spec.read_text().replace(
        "  script: train.py\n", "  script: train.py\n  env:\n    HF_TOKEN: x\n"
    )
    spec.write_text(text)
    result = CliRunner().invoke(app, ["kubernetes", str(spec), "-o", str(manifests), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["result"]
    apply = f"kubectl apply -f {tmp_path / 'k8s.secrets.yaml'} -f {manifests}"
    assert data["next"] == [f"builder build {spec}", f"builder push {spec}", apply]
    assert f"next: {apply}" in result.stderr


def test_nothing_written_says_nothing_next() -> None:
    result = CliRunner().invoke(app, ["slurm", "--preset", "cpu-deepspeed"])
    assert result.exit_code == 0, result.output
    assert "next:" not in result.stderr


@pytest.mark.parametrize(
    ("image", "warned"),
    [
        ("team/train:1.0", True),
        ("train:1.0", True),
        ("docker.io/team/train:1.0", False),
        ("registry.example.com:5000/team/train:1.0", False),
        ("localhost/train:1", False),
    ],
)
def test_kubernetes_warns_of_an_image_no_node_can_pull(
    tmp_path: Path, image: str, *, warned: bool
) -> None:
    """Every kubelet pulls the image: one without a registry is Docker Hub's of that name."""
    manifests = tmp_path / "k8s.yaml"
    args = ["kubernetes", "--preset", "cpu-deepspeed", "--image", image, "-o", str(manifests)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (f"warning: image {image} names no registry" in result.stderr) == warned


def test_a_probe_job_written_says_submit_gather_and_judge(tmp_path: Path) -> None:
    folder = tmp_path / "probe"
    args = ["preflight", "-p", "cpu-deepspeed", "--scheduler", "slurm", "--dry-run"]
    lines = said_next(*args, "-o", str(folder), "--node-dir", "/shared/probe", "--quick")
    assert lines == [
        "job=$(sbatch --parsable --wait /shared/probe/job.sbatch)",
        'cat /shared/probe/logs/"${job%%;*}"/*.out > preflight.log',
        "builder preflight --preset cpu-deepspeed --scheduler slurm --from-log preflight.log",
    ]
    readme = (folder / "README.md").read_text()
    assert all(f"`{line}`" in readme for line in lines)
    # the shell reads the gathering line as one command with its redirection
    assert shlex.split(lines[1]) == [
        "cat",
        "/shared/probe/logs/${job%%;*}/*.out",
        ">",
        "preflight.log",
    ]


def test_a_probe_trainjob_written_says_apply_wait_logs_judge_delete(tmp_path: Path) -> None:
    output = tmp_path / "probe.yaml"
    args = ["preflight", "-p", "cpu-deepspeed", "--scheduler", "kubernetes", "--dry-run"]
    lines = said_next(*args, "-o", str(output), "--threshold", "0.5")
    files = f"-f {tmp_path / 'probe.secrets.yaml'} -f {output}"
    name = "cpu-deepspeed-preflight"
    minutes = math.ceil((Settings(threshold=0.5).timeout + PULL_ALLOWANCE) / 60)
    assert lines == [
        "# the run's claims first, unless they exist: builder kubernetes --preset "
        "cpu-deepspeed -o RUN.yaml; kubectl apply -f RUN.yaml -l "
        "app.kubernetes.io/component=storage",
        f"kubectl apply {files}",
        f"kubectl wait --for=condition=Complete trainjob/{name} --timeout={minutes}m",
        f"kubectl logs -l jobset.sigs.k8s.io/jobset-name={name} --prefix --tail=-1 "
        "--max-log-requests=5 > preflight.log",
        "builder preflight --preset cpu-deepspeed --scheduler kubernetes --from-log "
        "preflight.log --threshold 0.5",
        f"kubectl delete {files}",
    ]


def test_a_pytorchjob_probe_is_waited_for_as_its_operator_says(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "preflight",
            "-p",
            "cuda-torchrun",
            "--scheduler",
            "kubernetes",
            "--dry-run",
            "--job",
            "pytorchjob",
            "-o",
            str(tmp_path / "probe.yaml"),
        ],
    )
    assert result.exit_code == 0, result.output
    said = result.stderr
    assert "--for=condition=Succeeded pytorchjob/" in said
    assert "-l training.kubeflow.org/job-name=" in said
    assert "--from-log preflight.log --job pytorchjob" in said


def test_a_pyxis_readme_says_the_squashfs_its_nodes_read(tmp_path: Path) -> None:
    spec = tmp_path / "stack.yaml"
    said_next("init", "-p", "cpu-deepspeed", "-o", str(spec))
    text = spec.read_text().replace(
        "launch:\n", "launch:\n  squashfs: /shared/images/train.sqsh\n", 1
    )
    spec.write_text(text)
    folder = tmp_path / "job"
    pinned = "registry.example.com/team/train@sha256:" + "c" * 64
    args = ["bundle", str(spec), "--scheduler", "slurm", "--runtime", "pyxis", "-o", str(folder)]
    lines = said_next(*args, "--image", pinned)
    made = f"builder squashfs {pinned} -o /shared/images/train.sqsh"
    assert lines[0] == made  # pinned: nothing to build, the file still to make
    readme = (folder / "README.md").read_text()
    assert f"`{made}`" in readme
    assert "pulls it by that digest" not in readme

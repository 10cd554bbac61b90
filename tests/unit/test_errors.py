"""The exception tree: families that carry their context (the field and value, the
node, the image, the file), set where the errors are raised; exit codes and messages
unchanged."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from typer.testing import CliRunner

from builder import errors
from builder.cli import app
from builder.cluster.hostfile import choose_hosts, read_hostfile
from builder.cluster.ssh import Nodes, Ssh, reach
from builder.engine.docker import DockerEngine
from builder.engine.push import pull_image
from builder.errors import (
    EXIT_CODES,
    BuilderError,
    BuildError,
    ClusterError,
    DriftFound,
    EngineError,
    EngineUnavailable,
    InputError,
    Interrupted,
    LintError,
    NodeUnreachable,
    NotInEngine,
    OutputExists,
    PreflightFailed,
    Problem,
    RegistryError,
    RegistryRefused,
    RegistryUnreachable,
    RehearsalFailed,
    SpecError,
    ToolMissing,
    TransferFailed,
    UnknownDigest,
    UsageError,
    WrongArchitecture,
)
from builder.lint.findings import Finding, LintReport
from builder.lint.hadolint import parse_json
from builder.lock.take import take_lock
from builder.output import OutputFile, write_files
from builder.resolved import resolve
from builder.spec.loader import load_preset, parse_spec
from tests.conftest import MINIMAL
from tests.fakes import FakeEngine, FakeImage

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

FAMILIES: dict[type[BuilderError], tuple[type[BuilderError], ...]] = {
    InputError: (SpecError, UsageError, OutputExists),
    EngineError: (EngineUnavailable, BuildError, NotInEngine),
    ClusterError: (
        RehearsalFailed,
        DriftFound,
        PreflightFailed,
        NodeUnreachable,
        TransferFailed,
        WrongArchitecture,
    ),
    RegistryError: (RegistryUnreachable, RegistryRefused, UnknownDigest),
}
ON_THEIR_OWN = (LintError, ToolMissing, Interrupted)

DOCUMENTED = {
    "SpecError": 1,
    "UsageError": 2,
    "OutputExists": 3,
    "LintError": 4,
    "ToolMissing": 5,
    "EngineUnavailable": 10,
    "BuildError": 11,
    "RehearsalFailed": 12,
    "DriftFound": 13,
    "NotInEngine": 14,
    "PreflightFailed": 15,
    "NodeUnreachable": 16,
    "RegistryUnreachable": 17,
    "RegistryRefused": 18,
    "UnknownDigest": 19,
    "TransferFailed": 20,
    "WrongArchitecture": 21,
    "Interrupted": 130,
}
"""The exit codes as docs/troubleshooting.md documents them: the tree changed shape, not these."""


# the tree -----------------------------------------------------------------------------


def test_every_error_sits_in_its_family_under_builder_error() -> None:
    for family, members in FAMILIES.items():
        assert issubclass(family, BuilderError)
        for member in members:
            assert issubclass(member, family), member
            others = set(FAMILIES) - {family}
            assert not any(issubclass(member, other) for other in others), member
    for error in ON_THEIR_OWN:
        assert error.__bases__ == (BuilderError,)
    leaves = {c for members in FAMILIES.values() for c in members} | set(ON_THEIR_OWN)
    assert {c.__name__ for c in leaves} == set(EXIT_CODES)


def test_exit_codes_are_unchanged_and_the_families_have_none_of_their_own() -> None:
    assert EXIT_CODES == DOCUMENTED
    for name, code in DOCUMENTED.items():
        assert getattr(errors, name).exit_code == code
    assert not set(EXIT_CODES) & {family.__name__ for family in FAMILIES}


def test_the_docstring_draws_the_tree_with_the_exit_codes() -> None:
    rows = re.findall(r"── (\w+)(?: +(\d+)\b)?", errors.__doc__ or "")
    assert {name: int(code) for name, code in rows if code} == EXIT_CODES
    assert {name for name, code in rows if not code} == {family.__name__ for family in FAMILIES}


@pytest.mark.parametrize(
    "error", [c for members in FAMILIES.values() for c in members if c is not SpecError]
)
def test_context_is_optional_and_the_message_is_the_whole_text(
    error: type[BuilderError],
) -> None:
    raised = error("what is wrong; what to do")
    assert str(raised) == "what is wrong; what to do"
    assert raised.args == ("what is wrong; what to do",)
    context = {
        EngineError: ("image",),
        ClusterError: ("node",),
        RegistryError: ("registry", "reference"),
        UsageError: ("field", "value", "path"),
        OutputExists: ("path",),
        EngineUnavailable: ("address",),
        NotInEngine: ("container",),
    }
    for cls, names in context.items():
        if isinstance(raised, cls):
            assert all(getattr(raised, name) is None for name in names)


def test_each_leaf_takes_its_context_by_keyword() -> None:
    assert UsageError("m", field="--slots", value=0, path="h").path == Path("h")
    assert NotInEngine("m", image="t:1").image == "t:1"
    assert NotInEngine("m", container="c").container == "c"
    assert BuildError("m", ("sha256:a",), image="t:1").created == ("sha256:a",)
    assert EngineUnavailable("m", address="unix:///x.sock").address == "unix:///x.sock"
    assert UnknownDigest("m", registry="r:5000", reference="r:5000/t@sha256:a").registry == "r:5000"
    assert ToolMissing("m", tool="hadolint").tool == "hadolint"
    assert LintError("m", tool="hadolint", path="Dockerfile").paths == ("Dockerfile",)
    with pytest.raises(TypeError):
        NotInEngine("m", "t:1")  # type: ignore[call-arg]  # context is keyword-only


def test_one_node_or_several() -> None:
    one = TransferFailed("m", node="n1")
    assert (one.node, one.nodes) == ("n1", ("n1",))
    alone = PreflightFailed("m", nodes=["n2"])
    assert (alone.node, alone.nodes) == ("n2", ("n2",))
    several = DriftFound("m", nodes=["n1", "n2"])
    assert (several.node, several.nodes) == (None, ("n1", "n2"))
    assert RehearsalFailed("m").nodes == ()


def test_a_problem_carries_its_field_and_value_without_changing_its_text() -> None:
    problem = Problem("launch.slots", "expected a whole number", 7, value="many")
    assert (problem.field, problem.value) == ("launch.slots", "many")
    assert str(problem) == "launch.slots (line 7): expected a whole number"
    assert problem == Problem("launch.slots", "expected a whole number", 7)  # value aside
    assert "many" not in repr(problem)
    assert hash(Problem("a", "b", value=["unhashable"])) == hash(Problem("a", "b"))


# the context, where the errors are raised -------------------------------------------------


def test_a_spec_problem_names_its_field_and_value() -> None:
    text = MINIMAL.replace("accelerator: cpu", "accelerator: tpu") + "launch:\n  slots: many\n"
    with pytest.raises(SpecError) as caught:
        parse_spec(text, "t.yaml")
    found = {(p.field, p.value, p.line) for p in caught.value.problems}
    assert found == {("image.accelerator", "tpu", 3), ("launch.slots", "many", 7)}
    assert caught.value.source == "t.yaml"
    with pytest.raises(SpecError) as caught:
        parse_spec(MINIMAL + "launch:\n  nodes: [a, a]\n", "t.yaml")  # a rule of check_spec
    assert [(p.field, p.value) for p in caught.value.problems] == [("launch.nodes", ["a", "a"])]


def test_output_exists_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("mine\n")
    files = [OutputFile("Dockerfile", 0o644, "FROM x\n"), OutputFile("README", 0o644, "r\n")]
    with pytest.raises(OutputExists) as caught:
        write_files(files, tmp_path, force=False)
    assert isinstance(caught.value, InputError)
    assert caught.value.path == tmp_path / "Dockerfile"
    assert caught.value.paths == (tmp_path / "Dockerfile",)
    assert str(caught.value) == (
        f"{tmp_path / 'Dockerfile'} already exists with other content; nothing was written. "
        "Pass --force to replace, or choose another -o folder."
    )
    (tmp_path / "folder").mkdir()
    with pytest.raises(UsageError) as refused:
        write_files([OutputFile("folder", 0o644, "x")], tmp_path, force=True)
    assert refused.value.path == tmp_path / "folder"


def test_a_bad_hostfile_line_names_the_file_and_the_value(tmp_path: Path) -> None:
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("n1 slots=2\nn2 slots=lots\n")
    with pytest.raises(UsageError) as caught:
        read_hostfile(hostfile)
    assert (caught.value.path, caught.value.value) == (hostfile, "n2 slots=lots")
    assert str(caught.value) == f"{hostfile}:2: 'n2 slots=lots' is not `host slots=N`"


def test_a_bad_node_list_names_the_option_and_the_list() -> None:
    with pytest.raises(UsageError) as caught:
        choose_hosts(
            spec_nodes=None, spec_slots=None, nodes=["n[1-2"], slots=None, from_slurm=False, env={}
        )
    assert (caught.value.field, caught.value.value) == ("--nodelist", "n[1-2")
    assert str(caught.value) == "--nodelist: node list 'n[1-2': '[' is never closed"
    with pytest.raises(UsageError) as slots:
        choose_hosts(
            spec_nodes=None, spec_slots=None, nodes=["n1"], slots=0, from_slurm=False, env={}
        )
    assert (slots.value.field, slots.value.value) == ("--slots", 0)


class Answers(Nodes):
    """Nodes whose `ssh NODE true` answers from a table (no ssh)."""

    def __init__(self, answers: Mapping[str, tuple[int | None, str]]) -> None:
        super().__init__(Ssh(), lambda _: None)
        self.answers = answers

    def run(
        self, commands: Mapping[str, Sequence[str]], timeout: float, *, tty: bool = False
    ) -> dict[str, tuple[int | None, str]]:
        del timeout, tty
        return {node: self.answers[node] for node in commands}


def test_unreachable_nodes_are_named() -> None:
    refused = (255, "ssh: connect to host n2 port 22: Connection refused\n")
    with pytest.raises(NodeUnreachable) as caught:
        reach(Answers({"n1": (0, ""), "n2": refused}), ["n1", "n2"], "ship", "nothing was sent")
    assert isinstance(caught.value, ClusterError)
    assert (caught.value.node, caught.value.nodes) == ("n2", ("n2",))
    assert str(caught.value).startswith(
        "ship reaches every node with this machine's ssh (`ssh NODE`), and 1 of 2 did not "
        "answer; nothing was sent:\n  - n2: "
    )
    answers = Answers({"n1": (None, ""), "n2": refused})
    with pytest.raises(NodeUnreachable) as both:
        reach(answers, ["n1", "n2"], "ship", "nothing was sent")
    assert (both.value.node, both.value.nodes) == (None, ("n1", "n2"))


def test_an_image_missing_from_the_fake_engine_is_named() -> None:
    base = FakeImage("sha256:" + "b" * 64, ("debian:bookworm-slim",))
    with pytest.raises(NotInEngine) as caught:
        take_lock(resolve(load_preset("cpu-deepspeed")), FakeEngine(base), "team/train:1")
    assert isinstance(caught.value, EngineError)
    assert (caught.value.image, caught.value.container) == ("team/train:1", None)
    assert str(caught.value) == (
        "image team/train:1 is not built: run `builder build` first, then lock it"
    )


class _Api:
    def inspect_image(self, reference: str) -> dict[str, Any]:
        from docker.errors import ImageNotFound

        raise ImageNotFound(f"No such image: {reference}")


class _Containers:
    def get(self, container: str) -> Any:
        from docker.errors import NotFound

        raise NotFound(f"No such container: {container}")


class _Client:
    api = _Api()
    containers = _Containers()


def test_the_docker_engine_names_the_image_or_container_it_lacks() -> None:
    engine = DockerEngine(cast("Any", _Client()))
    with pytest.raises(NotInEngine) as image:
        engine.image("team/train:1")
    assert (image.value.image, image.value.container) == ("team/train:1", None)
    assert str(image.value) == (
        "the engine has no image 'team/train:1'; build it (`builder build`) or pull it"
    )
    with pytest.raises(NotInEngine) as container:
        engine.container_state("node1")
    assert (container.value.image, container.value.container) == (None, "node1")


class _Registry:
    def __init__(self, error: str) -> None:
        self.error = error

    def pull(self, reference: str, platform: str | None = None) -> Iterator[dict[str, Any]]:
        del reference, platform
        yield {"errorDetail": {"message": self.error}}


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        ("unauthorized: authentication required", RegistryRefused),
        ("manifest unknown", UnknownDigest),
        ("connection refused", RegistryUnreachable),
    ],
)
def test_registry_errors_name_the_registry_and_the_reference(
    error: str, raised: type[RegistryError]
) -> None:
    reference = "registry.example.com:5000/team/train@sha256:" + "a" * 64
    with pytest.raises(raised) as caught:
        pull_image(cast("Any", _Registry(error)), reference)
    assert caught.value.registry == "registry.example.com:5000"
    assert caught.value.reference == reference


def test_a_lint_failure_names_the_tool_and_the_files() -> None:
    finding = Finding("hadolint", "Dockerfile", 3, "warning", "DL3008", "pin versions")
    with pytest.raises(LintError) as caught:
        LintReport((finding,), ("Dockerfile: hadolint",)).raise_for_findings()
    assert (caught.value.tool, caught.value.path) == ("hadolint", "Dockerfile")
    assert caught.value.findings == (finding,)
    assert str(caught.value).endswith("\n  - Dockerfile:3: warning DL3008: pin versions [hadolint]")
    with pytest.raises(LintError) as odd:
        parse_json("not json", "Singularity.def")
    assert (odd.value.tool, odd.value.path) == ("hadolint", "Singularity.def")


# the CLI ------------------------------------------------------------------------------------


def test_the_cli_prints_the_same_one_paragraph_message(tmp_path: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["hostfile", "--nodes", "n[1-2"])
    assert (done.exit_code, done.stderr) == (
        2,
        "error: --nodelist: node list 'n[1-2': '[' is never closed\n",
    )
    target = tmp_path / "stack.yaml"
    target.write_text("mine\n")
    done = runner.invoke(app, ["init", "--preset", "cpu-deepspeed", "-o", str(target)])
    assert (done.exit_code, done.stderr) == (
        3,
        f"error: {target} already exists with other content; nothing was written. "
        "Pass --force to replace, or choose another -o file.\n",
    )


def test_what_a_rank_wrote_reaches_the_terminal_without_control_characters() -> None:
    from builder.errors import clipped
    from builder.launch.logs import tail

    written = "boom\x1b[2J\x1b]0;owned\x07 at 50%\r\n\tnext line\x9b31m"
    for shown_text in (clipped(written), tail(written)):
        assert "\x1b" not in shown_text
        assert "\x07" not in shown_text
        assert "\r" not in shown_text
        assert "\x9b" not in shown_text
        assert "\tnext line" in shown_text  # a tab and the line break stay

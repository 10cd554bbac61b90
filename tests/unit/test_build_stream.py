"""Parsing the classic builder's event stream, with a fake engine (the real one is in
tests/integration)."""

from __future__ import annotations

import io
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from builder.engine.build import build_image
from builder.engine.progress import PlainProgress
from builder.errors import BuildError, Interrupted
from builder.image.inputs import BuildInputs
from builder.resolved import resolve
from builder.spec.loader import load_preset

if TYPE_CHECKING:
    from collections.abc import Iterator


class FakeEngine:
    """Replays a recorded event stream; records tags."""

    def __init__(self, events: list[dict[str, Any]], interrupt_after: int | None = None) -> None:
        self.events, self.interrupt_after = events, interrupt_after
        self.tags: list[tuple[str, str]] = []

    def build(self, _context: Any, **_: Any) -> Iterator[dict[str, Any]]:
        for index, event in enumerate(self.events):
            if index == self.interrupt_after:
                raise KeyboardInterrupt
            yield event

    def tag(self, image_id: str, reference: str) -> None:
        self.tags.append((image_id, reference))


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Failure logs go under $XDG_STATE_HOME: here, never the user's own."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


OK: list[dict[str, Any]] = [
    {"stream": "Step 1/3 : FROM debian AS system\n"},
    {"stream": " ---> 1234\n"},
    {"stream": "Step 2/3 : RUN apt-get update\n"},
    {"stream": " ---> Using cache\n"},
    {"stream": "Step 3/3 : RUN pip install x\n"},
    {"stream": " ---> Running in abc\n"},
    {"stream": "Collecting x\nInstalling x\n"},
    {"aux": {"ID": "sha256:feedbeef0000111122223333"}},
    {"stream": "Successfully built feedbeef0000\n"},
]


def test_a_good_stream_tags_once_and_records_steps() -> None:
    engine = FakeEngine(OK)
    out = io.StringIO()
    result = build_image(
        resolve(load_preset("cpu-deepspeed"), BuildInputs()),
        reference="t/x:1",
        engine=engine,  # type: ignore[arg-type]
        progress=PlainProgress(out),
    )
    assert engine.tags == [("sha256:feedbeef0000111122223333", "t/x:1")]
    assert [(s.number, s.cached) for s in result.steps] == [(1, False), (2, True), (3, False)]
    text = out.getvalue()
    assert "[2/3] RUN apt-get update\n    cached" in text
    assert "    | Installing x" in text
    assert "built t/x:1 (feedbeef0000) " in text


def test_an_error_names_the_step_keeps_the_log_and_tags_nothing() -> None:
    events = [
        *OK[:6],
        {"stream": "E: no such package\n"},
        {"error": "boom", "errorDetail": {"message": "The command returned a non-zero code: 100"}},
    ]
    engine = FakeEngine(events)
    with pytest.raises(BuildError) as info:
        build_image(
            resolve(load_preset("cpu-deepspeed"), BuildInputs()),
            reference="t/x:1",
            engine=engine,  # type: ignore[arg-type]
        )
    message = str(info.value)
    assert "failed at step 3/3: RUN pip install x" in message
    assert "non-zero code: 100" in message
    assert "    E: no such package" in message
    log = message.split("full log: ")[1].split(";", maxsplit=1)[0]
    assert "Step 3/3 : RUN pip install x" in Path(log).read_text()
    assert info.value.created == ()  # step 3 failed before leaving an image
    assert engine.tags == []


def test_interrupting_tags_nothing() -> None:
    engine = FakeEngine(OK, interrupt_after=5)
    with pytest.raises(Interrupted, match="nothing was tagged"):
        build_image(
            resolve(load_preset("cpu-deepspeed"), BuildInputs()),
            reference="t/x:1",
            engine=engine,  # type: ignore[arg-type]
        )
    assert engine.tags == []


def test_the_images_a_build_made_are_recorded_but_not_cache_hits_or_bases() -> None:
    events: list[dict[str, Any]] = [
        {"stream": "Step 1/3 : FROM debian AS system\n"},
        {"stream": " ---> 1111aaaa2222\n"},
        {"stream": "Step 2/3 : RUN apt-get update\n"},
        {"stream": " ---> Using cache\n"},
        {"stream": " ---> 3333bbbb4444\n"},
        {"stream": "Step 3/3 : RUN pip install x\n"},
        {"stream": " ---> Running in cccc55556666\n"},
        {"stream": "Removing intermediate container cccc55556666\n"},
        {"stream": " ---> 7777dddd8888\n"},
        {"aux": {"ID": "sha256:7777dddd8888"}},
    ]
    engine: Any = FakeEngine(events)
    result = build_image(
        resolve(load_preset("cpu-deepspeed"), BuildInputs()), reference="t/x:1", engine=engine
    )
    assert result.created == ("7777dddd8888",)
    assert [s.instruction for s in result.cacheable_steps] == [
        "RUN apt-get update",
        "RUN pip install x",
    ]
    assert result.cached_steps == 1
    # every step's image, made or reused (" ---> Running in" names a container, not one)
    assert [s.image for s in result.steps] == ["1111aaaa2222", "3333bbbb4444", "7777dddd8888"]


FAILING: list[dict[str, Any]] = [
    *OK[:6],
    {"stream": "E: no such package\n"},
    {"error": "boom", "errorDetail": {"message": "The command returned a non-zero code: 100"}},
]


def failed_build_message() -> str:
    with pytest.raises(BuildError) as info:
        build_image(
            resolve(load_preset("cpu-deepspeed"), BuildInputs()),
            reference="t/x:1",
            engine=FakeEngine(FAILING),  # type: ignore[arg-type]
        )
    return str(info.value)


def test_the_failure_log_is_a_new_private_file_in_a_private_folder(state_home: Path) -> None:
    first = Path(failed_build_message().split("full log: ")[1].split(";", maxsplit=1)[0])
    second = Path(failed_build_message().split("full log: ")[1].split(";", maxsplit=1)[0])
    assert first != second  # a unique name each time: nothing is replaced
    folder = state_home / "builder" / "logs"
    assert first.parent == folder == second.parent
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(first.stat().st_mode) == 0o600
    assert "E: no such package" in first.read_text()


def test_without_xdg_state_home_the_log_goes_under_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    log = Path(failed_build_message().split("full log: ")[1].split(";", maxsplit=1)[0])
    assert log.parent == tmp_path / "home" / ".local" / "state" / "builder" / "logs"


def test_an_open_log_folder_is_made_private(state_home: Path) -> None:
    folder = state_home / "builder" / "logs"
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    failed_build_message()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_log_folder_that_is_a_link_is_never_followed(state_home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (state_home / "builder").mkdir(parents=True)
    (state_home / "builder" / "logs").symlink_to(elsewhere)
    message = failed_build_message()
    assert "the full log could not be kept" in message
    assert "no tag was moved" in message
    assert list(elsewhere.iterdir()) == []

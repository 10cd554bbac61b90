"""The preflight judge is total: any line of a saved log (``--from-log``) or of the ranks'
output gives the table or a named finding, never a traceback, in time linear in the log;
nothing a rank wrote reaches the terminal as a control sequence."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.preflight.report import MARK, judge, probe_reports
from builder.preflight.show import table as preflight_table
from tests.unit.test_preflight import expected, output, reports

WANT = expected()


def _set(path: str, value: Any) -> Any:
    """A per-node change that sets report[a][b]... = value (a path of keys and indexes)."""

    def change(report: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = report
        for key in parents:
            if isinstance(node, dict) and key not in node:
                return  # a rank without it (only a node's first has a fingerprint)
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


MALFORMED: list[tuple[str, Any]] = [
    ("world", "two"),
    ("world", [2]),
    ("versions", ["torch", "2.15.0"]),
    ("versions", "2.15.0"),
    ("device_names", 7),
    ("device_names", [["nested"], {"a": 1}]),
    ("matmul", [1, 2]),
    ("matmul.tflops", "fast"),
    ("matmul.tflops", float("inf")),
    ("memory", "3000"),
    ("allreduce", [1]),
    ("allreduce.world", {"min": 1}),
    ("allreduce.world.0", {"bytes": 1}),  # a point without min and max
    ("allreduce.world.0.min", "6"),
    ("allreduce.intra.0", "x"),
    ("transport", ["IB"]),
    ("transport.net", 5),
    ("fingerprint", "abc"),
    ("fingerprint.data", [1, 2]),
    ("fingerprint.data.packages", "torch"),
    ("deepspeed_ops", {"built": 5, "ops": "x"}),
    ("visible", "8"),
    ("out_gbps", {"x": 1}),
    ("error", {"nested": ["x"]}),
    ("device_ok", "no"),
]


@pytest.mark.parametrize(("path", "value"), MALFORMED, ids=[p for p, _ in MALFORMED])
def test_a_malformed_field_is_a_finding_or_ignored_never_a_crash(path: str, value: Any) -> None:
    found = reports(WANT, node2={"x": _set(path, value)})
    result = judge(output(found), WANT)
    table = preflight_table(result)
    assert "node2" in table
    assert result.nodes[0].node == "node1"


RANKS: list[Any] = ["1", 1.0, 1e400, -1, True, None, [1], {"r": 1}, 10**30, 1 << 20]


@pytest.mark.parametrize("rank", RANKS, ids=[repr(r)[:20] for r in RANKS])
def test_a_report_whose_rank_is_not_one_is_left_out_and_its_rank_named_missing(rank: Any) -> None:
    found = reports(WANT)
    found[3]["rank"] = rank
    result = judge(output(found), WANT)
    texts = [f.text() for f in result.findings]
    assert any("rank(s) 3 never reported" in text for text in texts), texts


@pytest.mark.parametrize(
    "line",
    [
        MARK + "[" * 100_000,
        MARK + "{" * 50_000,
        MARK + '{"rank": ' + "9" * 5000 + "}",
        MARK + '{"rank": 1e400}',
        MARK + '{"rank": 1, "local_rank": NaN, "world": Infinity}',
        MARK + "\x00\x1b[2J\x07",
        MARK + '{"rank": 0, "node": "n\\u001b]0;pwned\\u0007"}',
        MARK * 1000,
        MARK + '"just a string"',
        MARK + "[1, 2, 3]",
        MARK + "{" + ", ".join(f'"k{i}": {i}' for i in range(20_000)) + "}",
    ],
    ids=lambda line: repr(line[len(MARK) : len(MARK) + 16]),
)
def test_any_line_is_judged(line: str) -> None:
    result = judge(line + "\n" + output(reports(WANT)), WANT)
    table = preflight_table(result)
    assert "\x1b" not in table
    assert "\x07" not in table


def test_text_from_a_rank_reaches_the_terminal_without_control_characters() -> None:
    error = "CUDA error\x1b[31m: out of memory\x07\r\x1b]0;owned\x07"
    found = reports(WANT, node3={"error": error, "node": "node3\x1b[2K"})
    result = judge(output(found), WANT)
    texts = "\n".join(f.text() for f in result.findings) + preflight_table(result)
    assert "CUDA error?[31m: out of memory" in texts
    for control in ("\x1b", "\x07", "\r"):
        assert control not in texts


def test_cut_lines_take_linear_time() -> None:
    """40,000 cut report lines (about 2 MB), as pdsh interleaving leaves them: each line
    is read within itself (it took 13 s when every failed decode counted the lines before
    it), and the ranks are named missing."""
    line = MARK + json.dumps(reports(WANT)[0])
    text = "\n".join([line[: len(line) // 2]] * 40_000)
    assert probe_reports(text, MARK) == []
    result = judge(text, WANT)
    assert any("never reported" in f.text() for f in result.findings)


def test_from_log_on_a_hostile_file_exits_with_findings_not_a_traceback(tmp_path: Any) -> None:
    log = tmp_path / "preflight.log"
    lines = [MARK + "[" * 100_000, MARK + '{"rank": "0"}', MARK + '{"rank": 1, "world": "x"}']
    log.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(
        app, ["preflight", "--preset", "cpu-deepspeed", "--from-log", str(log)]
    )
    assert result.exit_code == 15, result.output
    assert "Traceback" not in result.output
    assert "never reported" in result.output

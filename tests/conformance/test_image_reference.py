"""builder reads image references as the real docker CLI does: each reference of the
corpus goes to `docker pull`, which parses it on the client (the distribution reference
grammar it vendors) before it asks an engine anything. A refused one stops there, with
docker's own words on stderr, which must be InvalidReference.reason word for word. An
accepted one reaches a stand-in engine here (a small HTTP server) as
``POST /images/create?fromImage=NAME&tag=TAG``: the normalised name and the tag (the
digest where there is one, latest where there is neither) must be builder's."""

from __future__ import annotations

import http.server
import queue
import re
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import pytest

from builder.image.reference import InvalidReference, parse
from tests.conftest import real_tool, unavailable

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

OLDEST = 27
"""docker/cli has vendored distribution/reference v0.6.0 since v27.0 (v25-26: v0.5.0,
which counted the registry host in the 255 characters)."""

HEX = "0123456789abcdef" * 4
SHA256 = f"sha256:{HEX}"
OK = "valid"

# (reference, what it shows): every reference is checked against docker either way;
# the label only keeps the corpus readable and shows that it holds both kinds.
CORPUS: list[tuple[str, str]] = [
    # names, and how docker normalises them
    ("ubuntu", OK),
    ("ubuntu:22.04", OK),
    ("library/ubuntu", OK),
    ("docker.io/ubuntu", OK),
    ("docker.io/library/ubuntu:latest", OK),
    ("index.docker.io/team/train:1", OK),
    ("docker.io/library/team/train", OK),
    ("team/train", OK),
    ("team/train:1.0", OK),
    ("a/b/c/d/e", OK),
    ("localhost/x", OK),
    ("localhost:5000/team/train", OK),
    ("localhost", OK),
    ("localhost:5000", OK),  # docker.io/library/localhost, tag 5000
    ("registry.example.com/team/train:1", OK),
    ("registry.example.com:5000/team/train", OK),
    ("Registry.Example:5000/team/x", OK),
    ("REGISTRY.EXAMPLE.COM/x", OK),
    ("Team/x", OK),  # a capital makes the first component a registry host
    ("127.0.0.1:5000/x", OK),
    ("[::1]:5000/x", OK),
    ("[2001:db8::33]/team/x:1", OK),
    ("my-registry:5000/x", OK),
    ("a_b.com/x", OK),  # '.' makes it a host to split, '_' makes it a path component
    ("example.com:0/x", OK),
    ("example.com:99999999/x", OK),
    # path components: separators
    ("team/a---b", OK),
    ("team/a-b", OK),
    ("team/a__b", OK),
    ("team/a_b", OK),
    ("team/a.b", OK),
    ("team/a.b-c__d", OK),
    ("team/a.-b", "two separators together"),
    ("team/a___b", "three underscores"),
    ("team/a..b", "two dots"),
    ("team/a_.b", "'_' and '.' together"),
    ("team/-a", "component starts with '-'"),
    ("team/a-", "component ends with '-'"),
    ("team/.a", "component starts with '.'"),
    ("team/a_", "component ends with '_'"),
    ("team/", "trailing '/'"),
    ("/team/x", "leading '/'"),
    ("team//x", "empty component"),
    ("-x", "leading '-'"),
    ("team/X", "capital in the path"),
    ("UPPER", "capital in a one-word name"),
    ("localhost:5000/X", "capital after a host"),
    ("team/x-Y:1", "capital in the path, tagged"),
    # registry hosts
    ("-registry.example.com/x", "host starts with '-'"),
    ("registry-.example.com/x", "host part ends with '-'"),
    ("registry..example.com/x", "empty host part"),
    ("registry.example.com:/x", "empty port"),
    ("registry.example.com:abc/x", "port not digits"),
    ("[::1/x", "unclosed IPv6"),
    ("[fe80::1%eth0]:5000/x", "IPv6 zone"),
    ("exampİe.com/x", "non-ASCII capital in the host"),
    ("under_score.example.com/team/x", OK),  # no host: the whole is a path, as a_b.com/x
    # tags
    ("team/x:" + "t" * 128, OK),
    ("team/x:" + "t" * 129, "129-character tag"),
    ("team/x:_under", OK),
    ("team/x:UPPER.Case-1", OK),
    ("team/x:.dot", "tag starts with '.'"),
    ("team/x:-dash", "tag starts with '-'"),
    ("team/x:", "empty tag"),
    ("team/x:1:2", "two tags"),
    ("team/x:a/b", "'/' in a tag"),
    ("team/x:t+1", "'+' in a tag"),
    # digests
    (f"team/x@{SHA256}", OK),
    (f"team/x:1@{SHA256}", OK),  # tag and digest: docker pulls by the digest
    (f"localhost:5000/team/x@{SHA256}", OK),
    (f"team/x@sha384:{'ab' * 48}", OK),
    (f"team/x@sha512:{'ab' * 64}", OK),
    (f"team/x@sha256:{HEX.upper()}", "uppercase hex"),
    (f"team/x@sha256:{HEX[:40]}", "short sha256"),
    (f"team/x@sha256:{HEX[:31]}", "under 32 hex digits"),
    (f"team/x@sha256:{HEX}00", "long sha256"),
    (f"team/x@md5:{HEX[:32]}", "unknown algorithm"),
    (f"team/x@SHA256:{HEX}", "capital algorithm"),
    (f"team/x@{HEX}", "no algorithm"),
    (f"team/x@{SHA256}@{SHA256}", "two digests"),
    (f"team/x@{SHA256}\n", "line break after the digest"),
    (f"@{SHA256}", "digest alone"),
    (SHA256, OK),  # docker.io/library/sha256, tag 0123...: a name, not a digest
    (HEX, "a 64-hex image ID"),
    (HEX[:63], OK),
    # lengths: the path (docker.io's library/ included) at most 255 characters
    ("a" * 247, OK),
    ("a" * 248, "255 with library/"),
    ("team/" + "a" * 250, OK),
    ("team/" + "a" * 251, "256-character path"),
    ("registry.example.com/" + "a" * 255, OK),
    ("h" * 300 + ".com/x", OK),
    # empty, blanks, odd characters
    ("", "empty"),
    (" ", "a space"),
    ("team/x ", "trailing space"),
    (" team/x", "leading space"),
    ("team/x\t", "tab"),
    ("team/x\n", "line break"),
    ("team/tr\u0430in", "Cyrillic a"),
    ("téam/x", "non-ASCII letter"),
    ("team/x:1✓", "non-ASCII in a tag"),
    ("team/x;rm", "';'"),
    ("team/*", "'*'"),
    ("team/x@", "nothing after '@'"),
    (":1", "no name"),
]


@dataclass
class Engine:
    """A stand-in engine: records `docker pull`'s requests and refuses every one."""

    server: http.server.ThreadingHTTPServer
    requests: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.server.server_address[1]}"


def _engine() -> Engine:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            engine.requests.append(self.path)
            if self.path.endswith("/_ping"):
                status, body = 200, b"OK"
            else:
                status, body = 500, b'{"message": "builder-stand-in"}'
            self.send_response(status)
            self.send_header("API-Version", "1.45")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_POST = do_HEAD = _answer

        def log_message(self, *_args: object) -> None:
            pass

    engine = Engine(http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler))
    threading.Thread(target=engine.server.serve_forever, daemon=True).start()
    return engine


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    said: str
    """docker's words on a refused reference; on an accepted one, the NAME and TAG the
    engine was asked for, and whether docker said it used the default tag."""


@pytest.fixture(scope="module")
def docker_pull(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Verdict]]:
    """The docker CLI's verdict on every reference of the corpus (run 8 at a time)."""
    exe = real_tool("docker")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    major = re.search(r"version (\d+)\.", version.stdout)
    if major is None or int(major[1]) < OLDEST:
        unavailable(
            f"{exe} is {version.stdout.strip() or 'not the docker CLI'}: the reference "
            f"grammar is the one docker CLI {OLDEST}.0 and later vendor; install a newer CLI"
        )
    config: Path = tmp_path_factory.mktemp("docker-config")  # no credential helper, no hook
    engines: queue.Queue[Engine] = queue.Queue()
    for _ in range(8):
        engines.put(_engine())

    def pull(reference: str) -> Verdict:
        engine = engines.get()
        try:
            engine.requests.clear()
            result = subprocess.run(
                [exe, "pull", "--", reference],
                env={"DOCKER_HOST": engine.address, "DOCKER_CONFIG": str(config)},
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            created = [r for r in engine.requests if "/images/create?" in r]
        finally:
            engines.put(engine)
        if not created:
            return Verdict(False, result.stderr.strip())
        query = parse_qs(urlsplit(created[0]).query)
        default = "Using default tag: latest" in result.stdout
        return Verdict(True, f"{query['fromImage'][0]} {query['tag'][0]} {default}")

    with ThreadPoolExecutor(8) as pool:
        verdicts = dict(zip(CORPUS, pool.map(pull, [r for r, _ in CORPUS]), strict=True))
    yield {reference: verdict for (reference, _), verdict in verdicts.items()}
    while not engines.empty():
        server = engines.get().server
        server.shutdown()
        server.server_close()


def builders(reference: str) -> Verdict:
    """builder's verdict, in the same terms."""
    try:
        ref = parse(reference)
    except InvalidReference as exc:
        return Verdict(False, exc.reason)
    default = ref.tag is None and ref.digest is None
    tag = ref.digest or ref.with_default_tag().tag
    return Verdict(True, f"{ref.name} {tag} {default}")


def test_the_corpus_holds_both_kinds() -> None:
    valid = sum(1 for _, label in CORPUS if label == OK)
    assert len(CORPUS) >= 60
    assert valid >= 25
    assert len(CORPUS) - valid >= 40
    assert len({r for r, _ in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize(("reference", "label"), CORPUS, ids=[repr(r)[:40] for r, _ in CORPUS])
def test_builder_reads_the_reference_as_docker_does(
    docker_pull: dict[str, Verdict], reference: str, label: str
) -> None:
    docker = docker_pull[reference]
    assert docker.accepted == (label == OK), f"the corpus mislabels {reference!r}: {docker}"
    assert builders(reference) == docker

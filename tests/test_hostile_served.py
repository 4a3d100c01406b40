"""Hostile servers for `halluflow answer run --backend openai`, third round: what a server says, and failures in served
runs. A REAL local server on 127.0.0.1 (tests/chat_server.py) echoes the key in its GET /v1/models ids, in error
bodies split across line breaks or written with JSON / URL escapes, in masked form as OpenAI's 401 does, and in
answers; it answers bodies nested 200,000 deep, a 200 that carries only an error, and a wrong model id; the cache's
disk fills mid-shard. Each case asserts the exit code, at most one error line and no traceback, that no 8-character
piece of the key is in any file the run wrote, any output stream or any log record, and that its inputs are unchanged.
The runs go through the CLI's own entry point, in-process (20 repeated runs stay cheap).
"""

from __future__ import annotations

import errno
import hashlib
import json
import re
from contextlib import contextmanager
from pathlib import Path

import pytest
from chat_server import ChatServer
from helpers import make_graph

from halluflow.cli import main
from halluflow.models import registry

KEY_ENV = "HALLUFLOW_SERVED_KEY"
KEY = "sk-proj-Qm7vX2c9LpT4nR8sW1yZ6bK3dF0gH5jA"
MODEL = "org/served-vlm"
OBJECTS = ["dog", "cat", "car", "sky", "cloud", "grass", "frisbee", "unicorn"]


@pytest.fixture(scope="module")
def prior(tmp_path_factory):
    return registry.create("vlm", {"backend": "prior", "graph": str(make_graph(tmp_path_factory.mktemp("graph")))})


def write_labels(folder: Path, n: int = len(OBJECTS)) -> Path:
    """A POPE label file of n questions (question i names OBJECTS[i % 8]) and its image folder."""
    from PIL import Image

    images = folder / "images"
    images.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (9, 9, 9)).save(images / "a.png")
    path = folder / f"labels-{n}.jsonl"
    rows = [
        {"question_id": str(i), "image": "a.png", "text": f"Is there a {OBJECTS[i % 8]} {i} here?", "label": "yes"}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def labels(tmp_path):
    return write_labels(tmp_path / "inputs")


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def argv(labels: Path, out: Path, base_url: str, *extra: str, model: str = MODEL) -> list[str]:
    return [
        *("answer", "run", "--source", "pope", "--backend", "openai", "--name", "remote"),
        *("--questions", str(labels), "--images", str(labels.parent / "images")),
        *("--arg", f"base_url={base_url}", "--arg", f"model={model}", "--arg", f"api_key_env={KEY_ENV}"),
        *("--arg", "backoff_s=0.01", "--arg", "backoff_max_s=0.02", "--arg", "max_retries=1", "--arg", "timeout_s=5"),
        *extra,
        *("--out", str(out)),
    ]


def run_cli(args, capsys, caplog) -> tuple[int, str, str]:
    """(exit code, stdout + stderr, every log record) of one in-process CLI run."""
    caplog.clear()
    with caplog.at_level("DEBUG"):
        code = main(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err, caplog.text


def one_error_line(output: str, logs: str, *needles: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("halluflow: error:")]
    for text in (output, logs):
        assert "Traceback" not in text and "InvalidStateError" not in text, text[-3000:]
    assert len(lines) == 1, output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def no_error_line(output: str, logs: str) -> None:
    for text in (output, logs):
        assert "Traceback" not in text and "InvalidStateError" not in text, text[-3000:]
    assert "halluflow: error:" not in output, output


def pieces(secret: str = KEY) -> set[str]:
    return {secret[i : i + 8] for i in range(len(secret) - 7)}


def readable(text: str) -> list[str]:
    """A text as written, and as a reader would see it: JSON and URL escapes decoded, whitespace dropped (a key
    split across lines or spaced out is still the key)."""
    unescaped = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    unescaped = re.sub(r"%([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), unescaped)
    unescaped = re.sub(r"\\[nrt]", "", unescaped)
    return [text, "".join(unescaped.split())]


def leaked(root: Path, texts: list[str], secret: str = KEY) -> list[str]:
    """Where any 8 consecutive characters of the secret appear, as written or once unescaped: every file under
    root, every text."""
    hits = []
    named = [(str(p), p.read_bytes().decode("utf-8", "replace")) for p in root.rglob("*") if p.is_file()]
    for where, text in named + [(f"text {i}", t) for i, t in enumerate(texts)]:
        hits += [f"{where}: {p!r}" for form in readable(text) for p in pieces(secret) if p in form]
    return hits


def digest(folder: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()]


def cached(out: Path) -> int:
    return len(list((out.parent / (out.name + ".cache") / "remote").glob("??/*.json")))


def bearer(headers) -> str:
    return str(headers.get("Authorization"))


def body(status: int, payload) -> tuple[int, bytes]:
    return status, (payload if isinstance(payload, bytes) else json.dumps(payload).encode())


# Ways a server echoes the Authorization header in an error body, each a reply for ChatServer's callable faults.
ECHOES = {
    "verbatim": lambda h: body(401, {"error": f"rejected {bearer(h)}"}),
    "split-by-newline": lambda h: body(401, f"rejected {bearer(h)[:19]}\n{bearer(h)[19:]}".encode()),
    "split-json-escaped": lambda h: body(401, {"error": {"message": f"rejected {bearer(h)[:23]}\n{bearer(h)[23:]}"}}),
    "u002d-escapes": lambda h: body(401, ('{"error": "rejected ' + bearer(h).replace("-", "\\u002d") + '"}').encode()),
    "every-char-escaped": lambda h: body(
        401, ('{"error": "' + "".join(f"\\u{ord(c):04x}" for c in bearer(h)) + '"}').encode()
    ),
    "percent-escaped": lambda h: body(401, {"error": f"rejected url ?key={bearer(h).replace('-', '%2D')}"}),
    "truncated": lambda h: body(401, {"error": f"key {bearer(h)[7:27]}... is not valid"}),
    "one-char-per-line": lambda h: body(401, "\n".join(bearer(h)).encode()),
    "masked": lambda h: body(
        401,
        {
            "error": {
                "message": f"Incorrect API key provided: {KEY[:8]}{'*' * 24}{KEY[-4:]}. You can find your API key "
                "at https://platform.openai.com/account/api-keys.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        },
    ),
    "masked-short": lambda h: body(401, {"error": f"bad key {KEY[:5]}***...{KEY[-3:]}"}),
}


# ------------------------------------------------------------------------------------------------------- keys
@pytest.mark.parametrize("echo", list(ECHOES))
def test_a_key_echoed_in_an_error_body_leaves_no_piece_anywhere(prior, labels, tmp_path, key, capsys, caplog, echo):
    before = digest(labels.parent)
    out = tmp_path / "run" / "answers.jsonl"
    with ChatServer(prior, expected_key=KEY) as srv:
        srv.faults["a dog "] = [ECHOES[echo]]  # a 401 for one request (the shard stops: a 401 is shared)
        code, text, logs = run_cli(argv(labels, out, srv.base_url, "--max-failed-fraction", "1"), capsys, caplog)
    no_error_line(text, logs)
    assert code == 0 and digest(labels.parent) == before
    errors = [r["error"] for r in rows(out) if r["status"] == "failed"]
    assert any(e.startswith("HTTP 401: ") for e in errors), errors
    assert all("***" not in e and KEY[-3:] not in e for e in errors), errors  # masked forms dropped too
    assert leaked(tmp_path, [text, logs]) == []


def test_a_served_run_whose_server_echoes_the_key_everywhere_writes_no_piece_of_it(
    prior, labels, tmp_path, key, capsys, caplog
):
    """MUST-SHOW: the key in GET /v1/models ids, in split and escaped error bodies, in answers split and escaped:
    no 8-character piece of it in any file, log or stream, and the run's answers are all there."""
    before = digest(labels.parent)
    out = tmp_path / "run" / "answers.jsonl"
    with ChatServer(prior, expected_key=KEY, models=(MODEL, "placeholder")) as srv:
        srv.models_reply = lambda h: body(
            200,
            {
                "object": "list",
                "data": [{"id": MODEL}, {"id": f"echo {bearer(h)}"}, {"id": bearer(h)[:20] + "\n" + bearer(h)[20:]}],
            },
        )
        # 400s (a 401 would stop the shard): each fails its own request only
        srv.faults["a cat "] = [lambda h: (400, ECHOES["split-by-newline"](h)[1])]
        srv.faults["a car "] = [lambda h: (400, ECHOES["u002d-escapes"](h)[1])]
        srv.faults["a sky "] = [lambda h: body(500, f"upstream said {bearer(h)[:15]}\r\n{bearer(h)[15:]}".encode())] * 2
        answer = "Yes. You sent \\u0022" + KEY.replace("-", "\\u002d")[:30] + "\\n" + KEY[25:] + '\\""'
        srv.faults["a grass "] = [
            lambda h: (200, b'{"choices": [{"message": {"content": "' + answer.encode() + b"}}]}")
        ]
        code, text, logs = run_cli(argv(labels, out, srv.base_url, "--max-failed-fraction", "1"), capsys, caplog)
    no_error_line(text, logs)
    assert code == 0 and digest(labels.parent) == before
    table = {r["question_id"]: r for r in rows(out)}
    assert [table[q]["status"] for q in "0123456"] == ["ok", "failed", "failed", "failed", "ok", "ok", "ok"]
    assert table["1"]["error"].startswith("HTTP 400: ") and "[REDACTED]" in table["1"]["error"]
    assert table["5"]["answer"].startswith('Yes. You sent "[REDACTED]'), table["5"]
    assert leaked(tmp_path, [text, logs]) == []


def test_served_ids_that_echo_the_key_are_redacted_in_the_one_line(prior, labels, tmp_path, key, capsys, caplog):
    out = tmp_path / "run" / "answers.jsonl"
    with ChatServer(prior, expected_key=KEY, models=("org/other",)) as srv:
        srv.models_reply = lambda h: body(
            200, {"data": [{"id": f"org/other ({bearer(h)})"}, {"id": bearer(h).replace("-", "\n")}]}
        )
        code, text, logs = run_cli(argv(labels, out, srv.base_url), capsys, caplog)
    line = one_error_line(text, logs, f"model {MODEL!r} is not served", "GET /models lists 'org/other ([REDACTED])'")
    assert code == 1 and srv.posts == 1 and not out.exists()  # the probe only
    assert leaked(tmp_path, [text, logs, line]) == []


def test_a_key_pasted_as_the_model_argument_is_refused_without_echoing_it(prior, labels, tmp_path, key, capsys, caplog):
    out = tmp_path / "run" / "answers.jsonl"
    with ChatServer(prior, expected_key=KEY) as srv:
        code, text, logs = run_cli(argv(labels, out, srv.base_url, model=KEY), capsys, caplog)
    one_error_line(text, logs, "argument 'model' holds the API key", KEY_ENV)
    assert code == 1 and srv.posts == 0 and not out.exists()
    assert leaked(tmp_path, [text, logs]) == []


def test_a_key_shaped_model_argument_is_not_printed(prior, labels, tmp_path, capsys, caplog):
    """Without api_key_env, a key pasted as --arg model= is not known to be one; its shape (sk-...) still keeps it
    out of the INFO line, the error line and the recorded errors."""
    out = tmp_path / "run" / "answers.jsonl"
    with ChatServer(prior, models=("org/other",)) as srv:
        args = argv(labels, out, srv.base_url, model=KEY)
        at = args.index(f"api_key_env={KEY_ENV}")
        del args[at - 1 : at + 1]
        code, text, logs = run_cli(args, capsys, caplog)
    one_error_line(text, logs, "is not served")
    assert code == 1 and leaked(tmp_path, [text, logs]) == []


# ------------------------------------------------------------------------------------------------------- decoding
def test_a_reply_nested_200000_deep_is_one_recorded_failure(prior, labels, tmp_path, key, capsys, caplog):
    before = digest(labels.parent)
    out = tmp_path / "run" / "answers.jsonl"
    deep = b"[" * 200_000 + b"]" * 200_000
    with ChatServer(prior, expected_key=KEY) as srv:
        srv.faults["a dog "] = [lambda h: (200, deep)] * 2
        srv.faults["a cat "] = [lambda h: (200, b'{"choices": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_000)] * 2
        code, text, logs = run_cli(argv(labels, out, srv.base_url), capsys, caplog)
    one_error_line(text, logs, "2 of 8 answers failed")
    table = rows(out)
    failed = [r["error"] for r in table if r["status"] == "failed"]
    assert code == 1 and len(table) == 8 and cached(out) == 6 and digest(labels.parent) == before
    assert all("malformed JSON response (JSON nested deeper than" in e for e in failed), failed
    assert leaked(tmp_path, [text, logs]) == []


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        (b'{"data": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "answered no model list (body: JSON nested deeper"),
        (b'{"data": [{"id": "' + b"x" * (5 * 2**20) + b'"}]}', "reply larger than 4194304 bytes once decoded"),
        (b"\xff\xfe not json", "answered no model list (body: not valid JSON"),
    ],
    ids=["nested-200000", "over-the-cap", "not-json"],
)
def test_a_hostile_models_body_is_one_line_and_no_request(prior, labels, tmp_path, key, capsys, caplog, reply, needle):
    out = tmp_path / "run" / "answers.jsonl"
    with ChatServer(prior, expected_key=KEY, models=("org/other",)) as srv:
        srv.models_reply = lambda h: (200, reply)
        code, text, logs = run_cli(argv(labels, out, srv.base_url), capsys, caplog)
    one_error_line(text, logs, "/v1/models", needle, "no request was sent")
    assert code == 1 and srv.posts == 0 and not out.exists()


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ({"error": {"message": "model overloaded", "type": "server_error"}}, "server error: model overloaded"),
        ({"error": "busy, retry later"}, "server error: busy, retry later"),
        ({"error": {"code": 503}}, 'server error: {"code": 503}'),
    ],
    ids=["openai-style", "string", "no-message"],
)
def test_a_200_reply_carrying_an_error_is_recorded_as_that_error(
    prior, labels, tmp_path, key, capsys, caplog, reply, error
):
    out = tmp_path / "run" / "answers.jsonl"
    with ChatServer(prior, expected_key=KEY) as srv:
        srv.faults["a dog "] = [lambda h: body(200, reply)] * 2
        code, text, logs = run_cli(argv(labels, out, srv.base_url), capsys, caplog)
        assert srv.calls[next(q for q in srv.calls if "a dog " in q)] == 2  # retried, as a busy server's error is
    line = one_error_line(text, logs, "1 of 8 answers failed", error)
    failed = [r["error"] for r in rows(out) if r["status"] == "failed"]
    assert code == 1 and failed == [f"gave up after 2 attempts: {error}"] and "malformed" not in line


# ------------------------------------------------------------------------------------------------------- failures
def test_a_wrong_model_id_is_one_error_line_in_20_runs(prior, tmp_path, key, capsys, caplog):
    """MUST-SHOW: 20 runs against a server that does not serve the model, 64 questions each (the adaptive window
    queues them all): each exits 1 with exactly one error line and no traceback. Before, a cancelled request's
    completion set a result on a cancelled Future: ~3,600 lines of InvalidStateError in 8 of 11 runs."""
    labels = write_labels(tmp_path / "inputs", 64)
    before = digest(labels.parent)
    seen = []
    with ChatServer(prior, expected_key=KEY, models=("org/other",)) as srv:
        for i in range(20):
            out = tmp_path / f"run{i}" / "answers.jsonl"
            code, text, logs = run_cli(argv(labels, out, srv.base_url), capsys, caplog)
            seen.append((code, text, logs))
            one_error_line(text, logs, f"model {MODEL!r} is not served", "GET /models lists 'org/other'")
            assert code == 1 and not out.exists()
        posts = srv.posts
    assert posts == 20  # one probe per run, no question sent
    late = capsys.readouterr()  # anything a worker printed after its run returned
    assert "Traceback" not in late.out + late.err and "InvalidStateError" not in caplog.text
    assert digest(labels.parent) == before and [c for c, _, _ in seen] == [1] * 20


@contextmanager
def cache_disk_holding(monkeypatch, folder: Path, entries: int):
    """The disk under `folder` takes `entries` more files, then answers ENOSPC to every write, as a full disk does
    (every halluflow write goes through halluflow.io.atomic_path)."""
    import halluflow.io as hio

    real = hio.atomic_path
    left = [entries]

    @contextmanager
    def atomic_path(path, within=None):
        if Path(path).resolve().is_relative_to(folder.resolve()):
            if left[0] <= 0:
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
            left[0] -= 1
        with real(path, within) as tmp:
            yield tmp

    monkeypatch.setattr(hio, "atomic_path", atomic_path)
    try:
        yield
    finally:
        monkeypatch.setattr(hio, "atomic_path", real)


def test_a_disk_that_fills_mid_shard_keeps_every_answer_received(prior, tmp_path, key, monkeypatch, capsys, caplog):
    """The cache's disk fills after 5 answers of 18: no further request is sent, every answer that arrived (those in
    flight too) is in the answers file, the five cached ones stay cached, one line, exit 1; a rerun once the disk
    has room asks only what is not cached."""
    labels = write_labels(tmp_path / "inputs", 18)
    before = digest(labels.parent)
    out = tmp_path / "run" / "answers.jsonl"
    cache = tmp_path / "full-disk" / "cache"
    with ChatServer(prior, expected_key=KEY, delay_s=0.05) as srv:
        args = argv(labels, out, srv.base_url, "--arg", "concurrency=4", "--cache", str(cache))
        with cache_disk_holding(monkeypatch, cache.parent, 5):
            code, text, logs = run_cli(args, capsys, caplog)
        answered = srv.answered
        one_error_line(text, logs, "No space left on device", "5 answers received are cached")
        table = rows(out)
        ok = [r for r in table if r["status"] == "ok"]
        assert code == 1 and len(table) == 18 and len(ok) == answered and answered < 18
        assert all(
            r["error"].startswith("not sent: the request cache cannot take answers") for r in table if r not in ok
        )
        assert len(list((cache / "remote").glob("??/*.json"))) == 5
        posts = srv.posts
        code, text, logs = run_cli(args, capsys, caplog)  # the disk has room again
        no_error_line(text, logs)
        assert code == 0 and srv.posts - posts == 18 - 5 and all(r["status"] == "ok" for r in rows(out))
    assert digest(labels.parent) == before
    assert leaked(tmp_path, [text, logs]) == []

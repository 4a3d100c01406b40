"""Hostile servers, keys and arguments for `halluflow answer run --backend openai`, against a REAL local HTTP server
(tests/chat_server.py). Each case asserts the exit code, at most one error line and no traceback, that the key (and
any base_url credential) is in no file the run wrote, no output line and no log record — not even in part — and that
nothing was lost: every answer that arrived is cached, a rerun sends only what is missing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from chat_server import ChatServer, gzip_bomb
from helpers import make_graph

from halluflow.cli import main
from halluflow.models import registry

KEY_ENV = "HALLUFLOW_HOSTILE_KEY"
KEY = "sk-hostile-5b1f0e9c7d3a2b8e4f6a-0c9d"
OBJECTS = ["dog", "cat", "car", "sky", "cloud", "grass", "frisbee", "unicorn"]
# Where a key echoed after `pad` characters of padding sits relative to the 200-character cut of an error body
# ('HTTP 401: {"error": "' + pad + ' Authorization: Bearer ' + key): before, across and after it.
PADDINGS = [0, 120, 140, 150, 156, 160, 170, 199, 260]


@pytest.fixture(scope="module")
def prior(tmp_path_factory):
    return registry.create("vlm", {"backend": "prior", "graph": str(make_graph(tmp_path_factory.mktemp("graph")))})


@pytest.fixture
def labels(tmp_path):
    """A POPE label file (one question per object) and its image folder."""
    from PIL import Image

    images = tmp_path / "images"
    images.mkdir()
    Image.new("RGB", (8, 8), (9, 9, 9)).save(images / "a.png")
    path = tmp_path / "labels.jsonl"
    rows = [
        {"question_id": str(i), "image": "a.png", "text": f"Is there a {o} in the image?", "label": "yes"}
        for i, o in enumerate(OBJECTS)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def argv(labels: Path, out: Path, base_url: str, *args: str, key: bool = True) -> list[str]:
    return [
        *("answer", "run", "--source", "pope", "--backend", "openai", "--name", "remote"),
        *("--questions", str(labels), "--images", str(labels.parent / "images")),
        "--arg",
        f"base_url={base_url}",
        "--arg",
        "model=prior-over-http",
        *(["--arg", f"api_key_env={KEY_ENV}"] if key else []),
        "--arg",
        "backoff_s=0.01",
        "--arg",
        "backoff_max_s=0.02",
        "--arg",
        "max_retries=1",
        "--arg",
        "timeout_s=5",
        *args,
        "--out",
        str(out),
    ]


def run_cli(args, capsys, caplog) -> tuple[int, str, str]:
    """(exit code, stdout + stderr, every log record) of one in-process CLI run."""
    caplog.clear()
    with caplog.at_level("DEBUG"):
        code = main(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err, caplog.text


def one_error_line(output: str, *needles: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("halluflow: error:")]
    assert "Traceback" not in output, output
    assert len(lines) == 1, output
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "\n" not in lines[0]
    return lines[0]


def leaked(root: Path, texts: list[str], secrets: list[str]) -> list[str]:
    """Where any secret, or any 8 consecutive characters of one, appears: files under root, texts."""
    pieces = {s[i : i + 8] for s in secrets for i in range(len(s) - 7)}
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes().decode("utf-8", "replace")
            hits += [f"{path}: {p!r}" for p in pieces if p in data]
    for i, text in enumerate(texts):
        hits += [f"text {i}: {p!r}" for p in pieces if p in text]
    return hits


def cached(out: Path) -> int:
    return len(list((out.parent / (out.name + ".cache") / "remote").glob("??/*.json")))


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


# ---------------------------------------------------------------------------------------------- key echoes
@pytest.mark.parametrize("mode", ["error", "success"])
def test_an_echoed_key_is_redacted_everywhere_at_every_padding(prior, labels, tmp_path, key, capsys, caplog, mode):
    outputs = []
    for pad in PADDINGS:
        out = tmp_path / f"{mode}-{pad}" / "answers.jsonl"
        out.parent.mkdir()
        with ChatServer(prior, expected_key=KEY) as srv:
            for o in OBJECTS:
                srv.faults[f"a {o} "] = [f"401-echo:{pad}" if mode == "error" else f"echo-200:{pad}"]
            # A fixed concurrency of 4 (the default is adaptive and would send all 8 at once), so some are not sent.
            args = argv(labels, out, srv.base_url, "--max-failed-fraction", "1", "--arg", "concurrency=4")
            code, text, logs = run_cli(args, capsys, caplog)
            outputs += [text, logs]
        assert code == 0 and "Traceback" not in text
        table = rows(out)
        if mode == "error":  # a 401 is the key's: those in flight (concurrency 4) fail, the rest are not sent
            assert srv.posts <= 4 and all(r["status"] == "failed" for r in table)
            assert sum(r["error"].startswith("HTTP 401: ") for r in table) == srv.posts
        else:  # the answers quote the key: kept, redacted
            assert all(r["status"] == "ok" and r["answer"].endswith("[REDACTED]") for r in table), table
            assert cached(out) == len(OBJECTS)
    assert leaked(tmp_path, outputs, [KEY]) == []


def test_base_url_credentials_never_leave_and_the_query_is_kept(prior, labels, tmp_path, capsys, caplog):
    user_secret, query_secret = "pw-7f3e9a1c55", "qk-0d8b2e6f44"
    out = tmp_path / "answers.jsonl"
    with ChatServer(prior) as srv:
        url = srv.base_url.replace("http://", f"http://alice:{user_secret}@") + f"?key={query_secret}"
        srv.faults["a dog "] = ["500", "500"]  # one failure, so an error line is written too
        code, text, logs = run_cli(argv(labels, out, url, "--max-failed-fraction", "1", key=False), capsys, caplog)
        paths = list(srv.paths)
        backend = registry.create("vlm", {"backend": "openai", "base_url": url, "model": "m"})
        described = json.dumps(backend.describe().as_dict())
    assert code == 0 and "Traceback" not in text
    # The path is joined before the query string, which travels unchanged.
    assert set(paths) == {f"/v1/models?key={query_secret}", f"/v1/chat/completions?key={query_secret}"}
    assert [r["status"] for r in rows(out)].count("failed") == 1
    assert "httpx" not in logs  # no per-request lines (they carry the URL)
    assert "[REDACTED]@127.0.0.1" in described and "key=[REDACTED]" in described
    assert leaked(tmp_path, [text, logs, described], [user_secret, query_secret]) == []


@pytest.mark.parametrize(
    ("value", "needle"),
    [(KEY + "\u2019", "non-ASCII"), (KEY + "\n", "line break"), ("sk two words", "whitespace")],
    ids=["non-ascii", "newline", "space"],
)
def test_a_key_no_header_can_carry_is_one_line(prior, labels, tmp_path, monkeypatch, capsys, caplog, value, needle):
    monkeypatch.setenv(KEY_ENV, value)
    out = tmp_path / "answers.jsonl"
    with ChatServer(prior) as srv:
        code, text, logs = run_cli(argv(labels, out, srv.base_url), capsys, caplog)
    one_error_line(text, KEY_ENV, needle)
    assert code == 1 and srv.posts == 0 and not out.exists()
    assert leaked(tmp_path, [text, logs], [KEY]) == []


def test_a_key_pasted_as_api_key_env_is_refused_without_echoing_it(prior, labels, tmp_path, capsys, caplog):
    out = tmp_path / "answers.jsonl"
    with ChatServer(prior) as srv:
        args = [a.replace(f"api_key_env={KEY_ENV}", f"api_key_env={KEY}") for a in argv(labels, out, srv.base_url)]
        code, text, logs = run_cli(args, capsys, caplog)
    one_error_line(text, "api_key_env must be the NAME of an environment variable")
    assert code == 1 and srv.posts == 0 and not out.exists()
    assert leaked(tmp_path, [text, logs], [KEY]) == []


# ---------------------------------------------------------------------------------------------- server faults
def test_a_redirect_is_one_line_and_stops_the_shard(prior, labels, tmp_path, key, capsys, caplog):
    out = tmp_path / "answers.jsonl"
    with ChatServer(prior, expected_key=KEY) as srv:
        for o in OBJECTS:
            srv.faults[f"a {o} "] = ["redirect"]
        # A fixed concurrency of 4 (the adaptive default sends all 8 at once), so the rest is provably not sent.
        code, text, logs = run_cli(argv(labels, out, srv.base_url, "--arg", "concurrency=4"), capsys, caplog)
    line = one_error_line(text, "HTTP 307", "redirects to https://elsewhere.example/v1/chat/completions")
    assert code == 1 and srv.posts <= 4 and "malformed" not in line  # only those already in flight were sent
    assert all(r["status"] == "failed" for r in rows(out))
    assert leaked(tmp_path, [text, logs], [KEY]) == []


def test_a_trickled_status_line_is_held_no_longer_than_the_deadline(prior, labels, tmp_path, key, capsys, caplog):
    out = tmp_path / "answers.jsonl"
    with ChatServer(prior, expected_key=KEY, trickle_s=0.5) as srv:
        srv.faults["a dog "] = ["trickle-status"] * 2  # ~80 header bytes at 0.5 s each: 40 s without a deadline
        start = time.monotonic()
        args = argv(labels, out, srv.base_url, "--arg", "timeout_s=1", "--arg", "max_retries=0")
        code, text, logs = run_cli(args, capsys, caplog)
        elapsed = time.monotonic() - start
    one_error_line(text, "1 of 8 answers failed")
    assert code == 1 and elapsed < 4, elapsed
    failed = [r for r in rows(out) if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["error"].startswith("gave up after 1 attempts: timeout after 1 s")
    assert cached(out) == 7  # nothing else lost
    assert leaked(tmp_path, [text, logs], [KEY]) == []


def test_a_gzip_bomb_is_stopped_at_the_reply_cap(prior, labels, tmp_path, key):
    """1 MB of gzip expanding to 1 GiB: the process peaks far below 1 GiB and the request fails in one line."""
    out = tmp_path / "answers.jsonl"
    script = (
        "import re, sys\nfrom halluflow.cli import main\ncode = main(sys.argv[1:])\n"
        # VmHWM is this process's own peak: ru_maxrss keeps the forking pytest worker's peak across exec on Linux
        "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
        "print('PEAK_MB', int(hwm) // 1024, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    gzip_bomb()  # built before the server answers (it takes seconds): the request must not time out on it
    with ChatServer(prior, expected_key=KEY) as srv:
        srv.faults["a dog "] = ["gzip-bomb"]
        proc = subprocess.run(
            [sys.executable, "-c", script, *argv(labels, out, srv.base_url)],
            capture_output=True,
            text=True,
            env={**os.environ, KEY_ENV: KEY},
            timeout=300,
        )
    peak = int(proc.stderr.split("PEAK_MB")[1].split()[0])
    assert peak < 450, peak  # measured: 234 MB (125 MB without the bomb); unbounded decoding needs over 1 GiB
    one_error_line(proc.stderr, "1 of 8 answers failed")
    failed = [r for r in rows(out) if r["status"] == "failed"]
    assert len(failed) == 1 and "larger than 67108864 bytes once decoded" in failed[0]["error"]
    assert proc.returncode == 1 and cached(out) == 7
    assert leaked(tmp_path, [proc.stdout, proc.stderr], [KEY]) == []


@pytest.mark.parametrize("fault", ["empty", "blank"])
def test_an_empty_reply_is_failed_retried_never_cached(prior, labels, tmp_path, key, capsys, caplog, fault):
    out = tmp_path / "answers.jsonl"
    with ChatServer(prior, expected_key=KEY) as srv:
        srv.faults["a dog "] = [fault] * 2  # max_retries 1: both attempts empty
        code, text, logs = run_cli(argv(labels, out, srv.base_url), capsys, caplog)
        one_error_line(text, "1 of 8 answers failed")
        failed = [r for r in rows(out) if r["status"] == "failed"]
        assert code == 1 and len(failed) == 1 and "server reply is empty" in failed[0]["error"]
        assert failed[0]["answer"] == "" and cached(out) == 7
        posts = srv.posts
        code, text, _ = run_cli(argv(labels, out, srv.base_url), capsys, caplog)  # the rerun asks it alone again
        assert code == 0 and srv.posts - posts == 1 and all(r["status"] == "ok" for r in rows(out))
    assert leaked(tmp_path, [text, logs], [KEY]) == []


def test_a_lone_surrogate_in_a_reply_is_kept_replaced_and_cached(prior, labels, tmp_path, key, capsys, caplog):
    out = tmp_path / "answers.jsonl"
    with ChatServer(prior, expected_key=KEY) as srv:
        srv.faults["a dog "] = ["surrogate"]
        code, text, logs = run_cli(argv(labels, out, srv.base_url), capsys, caplog)
        assert code == 0 and "Traceback" not in text
        dog = next(r for r in rows(out) if r["question_id"] == "0")
        assert dog["status"] == "ok" and dog["answer"] == "Yes \ufffd"
        posts = srv.posts
        code, _, _ = run_cli(argv(labels, out, srv.base_url), capsys, caplog)
        assert code == 0 and srv.posts == posts  # every answer, the replaced one too, comes from the cache
    assert leaked(tmp_path, [text, logs], [KEY]) == []


def test_identical_per_request_400s_fail_only_their_requests(prior, labels, tmp_path, key, capsys, caplog):
    out = tmp_path / "answers.jsonl"
    with ChatServer(prior, expected_key=KEY) as srv:
        for o in OBJECTS[:3]:
            srv.faults[f"a {o} "] = ["400-too-large"]
        code, text, logs = run_cli(argv(labels, out, srv.base_url), capsys, caplog)
        one_error_line(text, "3 of 8 answers failed", "image too large")
        table = rows(out)
        assert code == 1 and [r["status"] for r in table].count("ok") == 5 and cached(out) == 5
        assert not any(r.get("error", "").startswith("not sent") for r in table)
        posts = srv.posts
        code, _, _ = run_cli(argv(labels, out, srv.base_url), capsys, caplog)
        assert code == 0 and srv.posts - posts == 3  # the rerun asks the three again, nothing else
    assert leaked(tmp_path, [text, logs], [KEY]) == []


# ---------------------------------------------------------------------------------------------- model and arguments
def test_a_wrong_model_against_a_hanging_models_endpoint_fails_fast(prior, labels, tmp_path, capsys, caplog):
    out = tmp_path / "answers.jsonl"
    with ChatServer(prior, models=("org/served",), models_stall_s=60) as srv:
        args = argv(labels, out, srv.base_url, key=False)
        args[args.index("timeout_s=5")] = "timeout_s=60"  # the default deadline: /models is capped below it
        start = time.monotonic()
        code, text, logs = run_cli(args, capsys, caplog)
        elapsed = time.monotonic() - start
    one_error_line(text, "GET ", "/v1/models did not answer within 10 s", "'prior-over-http'")
    assert code == 1 and elapsed < 30 and srv.posts == 0 and not out.exists()


def test_a_wrong_model_whose_probe_hangs_fails_in_one_line_naming_the_served_ids(
    prior, labels, tmp_path, capsys, caplog
):
    out = tmp_path / "answers.jsonl"
    with ChatServer(prior, models=("org/served",)) as srv:
        srv.unknown_model_stall_s = 60
        args = argv(labels, out, srv.base_url, key=False)
        args[args.index("timeout_s=5")] = "timeout_s=2"
        start = time.monotonic()
        code, text, logs = run_cli(args, capsys, caplog)
        elapsed = time.monotonic() - start
    one_error_line(text, "model 'prior-over-http' is not served", "GET /models lists 'org/served'", "timeout after 2 s")
    assert code == 1 and elapsed < 30 and srv.posts == 1 and not out.exists()  # the probe only


def test_an_erroring_models_endpoint_is_one_line_and_no_request(prior, labels, tmp_path, key, capsys, caplog):
    out = tmp_path / "answers.jsonl"
    with ChatServer(prior, expected_key="another-key", models=("org/served",)) as srv:
        srv.models_status = 401
        code, text, logs = run_cli(argv(labels, out, srv.base_url), capsys, caplog)
    one_error_line(text, "/v1/models answered HTTP 401")
    assert code == 1 and srv.posts == 0
    assert leaked(tmp_path, [text, logs], [KEY]) == []


@pytest.mark.parametrize(
    ("arg", "needle"),
    [
        ("timeoutt_s=5", "unknown argument 'timeoutt_s' (did you mean 'timeout_s'?)"),
        ("timeout_s=fast", "argument 'timeout_s' is 'fast'; expected a number"),
        ("max_retries=-1", "argument 'max_retries' is -1; expected a finite number >= 0"),
        ("timeout_s=.nan", "argument 'timeout_s' is nan"),
        ("concurrency=0", "argument 'concurrency' is 0"),
        ("extra_body=[1]", "argument 'extra_body' is [1]; expected a mapping or null"),
    ],
)
def test_bad_backend_arguments_are_one_line_before_any_request(
    prior, labels, tmp_path, key, capsys, caplog, arg, needle
):
    out = tmp_path / "answers.jsonl"
    with ChatServer(prior, expected_key=KEY) as srv:
        code, text, logs = run_cli(argv(labels, out, srv.base_url, "--arg", arg), capsys, caplog)
    one_error_line(text, "model 'remote' (vlm backend 'openai')", needle)
    assert code == 1 and srv.posts == 0 and not out.exists()


def test_a_missing_base_url_is_one_line(labels, tmp_path, capsys, caplog):
    out = tmp_path / "answers.jsonl"
    args = [a for a in argv(labels, out, "http://unused", key=False) if not a.startswith("base_url=")]
    args.remove("--arg")  # the one that named base_url
    code, text, _ = run_cli(args, capsys, caplog)
    one_error_line(text, "model 'remote' (vlm backend 'openai'): argument 'base_url' is required")
    assert code == 1 and not out.exists()


# ---------------------------------------------------------------------------------------------- kill -9
@pytest.mark.parametrize(("hold_after", "concurrency"), [(7, 1), (3, 3)])
def test_a_run_killed_after_k_of_n_replies_resends_exactly_n_minus_k(prior, labels, tmp_path, hold_after, concurrency):
    """The server holds every request after `hold_after` answers; once the client has cached every answer it got,
    it is killed with SIGKILL. The rerun sends exactly the requests whose answers never arrived."""
    out = tmp_path / "answers.jsonl"
    env = {**os.environ, KEY_ENV: KEY}
    with ChatServer(prior, expected_key=KEY, hold_after=hold_after) as srv:
        args = argv(labels, out, srv.base_url, "--arg", f"concurrency={concurrency}", "--batch-size", "8")
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from halluflow.cli import main; sys.exit(main(sys.argv[1:]))", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (srv.answered >= hold_after and cached(out) == srv.answered):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        time.sleep(0.3)  # anything still to arrive would have arrived: every further request is held
        k = srv.answered
        assert cached(out) == k >= hold_after, (cached(out), k)
        os.kill(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        srv.release()
        posts = srv.posts
        rerun = subprocess.run(
            [sys.executable, "-c", "import sys; from halluflow.cli import main; sys.exit(main(sys.argv[1:]))", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        resent = srv.posts - posts
    assert rerun.returncode == 0, rerun.stderr
    assert resent == len(OBJECTS) - k, (resent, k)
    assert [r["status"] for r in rows(out)] == ["ok"] * len(OBJECTS)
    assert leaked(tmp_path, [rerun.stdout, rerun.stderr, err.decode()], [KEY]) == []


# ---------------------------------------------------------------------------------------------- planning
@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"timeoutt_s": 5}, "unknown argument 'timeoutt_s' (did you mean 'timeout_s'?)"),
        ({"timeout_s": "fast"}, "argument 'timeout_s' is 'fast'; expected a number"),
        ({"max_retries": -1}, "argument 'max_retries' is -1; expected a finite number >= 0"),
        ({"base_url": None}, "argument 'base_url' is"),
    ],
    ids=["unknown", "type", "bound", "no-base-url"],
)
def test_the_workflow_refuses_bad_backend_arguments_when_planning(tmp_path, args, needle):
    """`snakemake -n` with a served model whose arguments its backend cannot take: one line naming the config key,
    the model and the argument, before any job is planned."""
    import yaml
    from workflow_utils import copy_workflow, run_snakemake

    work = copy_workflow(tmp_path / "wf")
    model = {"base_url": "http://127.0.0.1:9/v1", "model": "m", **args}
    model = {k: v for k, v in model.items() if v is not None}
    overlay = {"models": [{"name": "served", "backend": "openai", "stand_in": False, "args": model}]}
    (work / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    proc = run_snakemake(work, "-n", "--configfile", "config.yaml", "overlay.yaml", check=False, timeout=300)
    output = proc.stdout + proc.stderr
    lines = [line for line in output.splitlines() if "halluflow: invalid config" in line]
    assert proc.returncode != 0 and "Traceback" not in output, output[-3000:]
    assert len(lines) == 1 and "config key 'models.0.args': model 'served' (vlm backend 'openai')" in lines[0]
    assert needle in lines[0], lines[0]
    assert not (work / "results").exists() and not (work / "logs").exists()

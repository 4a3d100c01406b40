"""`halluflow models fetch` against a local Hub server (tests/hub_server.py) serving tiny stand-ins.

The offline try-out config (configs/offline/ode-paper.yaml) is pointed at Hub ids the local server serves: a model
under test and CAOS oracle member (tiny SmolVLM), the detector (tiny OWLv2). Fetching stages them into a tmp cache and
writes the lock; the lock's hashes are checked against the stand-in folders' bytes (hashlib here, not halluflow's
hasher); a later load through halluflow's transformers backend with HF_HUB_OFFLINE=1 sends no request to the server;
a tampered cached file is refused in one line; a gated repo fails in one line on how to authenticate. The
ultralytics part is checked without the internet: the planned files and their lock entries.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import write_pope_set
from hub_server import HubServer

from halluflow.models.fetch import LOCK_ENV

ROOT = Path(__file__).resolve().parents[1]
SMOLVLM = "halluflow-test/tiny-smolvlm"
OWLV2 = "halluflow-test/tiny-owlv2"
GATED = "black-forest-labs/FLUX.1-dev"


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    from halluflow.models.standins import build_standin

    root = tmp_path_factory.mktemp("standins")
    return {
        SMOLVLM: build_standin("smolvlm", root / "smolvlm", hidden_size=32, image_size=64),
        OWLV2: build_standin("owlv2", root / "owlv2"),
    }


@pytest.fixture()
def hub(standins, monkeypatch, tmp_path):
    with HubServer(standins, gated=(GATED,), lifetime_s=240) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # no token, no cache of this machine
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        yield server


def _config(tmp_path: Path, **over) -> Path:
    """The offline try-out config with its models named by Hub id (merged over it as --configfile does)."""
    layer = {
        "models": [
            {
                "name": "hub-smolvlm",
                "backend": "transformers",
                "args": {"model": SMOLVLM, "revision": "main", "device": "cpu", "dtype": "float32"},
            },
            {"name": "prior", "backend": "prior", "args": {"threshold": 0.1}},
        ],
        "detection": {"backend": "transformers", "model": OWLV2, "stand_in": {"enabled": False}},
        "caos": {"oracle": {"members": ["hub-smolvlm"] if "models" not in over else []}},
        **over,
    }
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump(layer))
    return path


def _cli(*args, env=None, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "halluflow.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_fetch_stages_models_and_locks_them(hub, standins, tmp_path):
    cache = tmp_path / "cache"
    cfg = _config(tmp_path)
    done = _cli("models", "fetch", "--configfile", "configs/offline/ode-paper.yaml", str(cfg), "--cache", str(cache))
    assert done.returncode == 0, done.stderr
    lock = json.loads((cache / "models.lock.json").read_text())
    by_repo = {m["repo"]: m for m in lock["models"]}
    assert set(by_repo) == {SMOLVLM, OWLV2}  # the prior downloads nothing; the oracle member is the same repo
    assert by_repo[SMOLVLM]["roles"] == ["caos.oracle.members.0", "models.hub-smolvlm"]
    assert by_repo[OWLV2]["roles"] == ["detection"]
    for repo, entry in by_repo.items():
        assert entry["revision"] == "main"
        assert entry["commit"] == hub.repos[repo].commit
        source = standins[repo]
        expected = {
            p.relative_to(source).as_posix(): (p.stat().st_size, _sha256(p)) for p in source.rglob("*") if p.is_file()
        }
        assert {f["path"]: (f["size"], f["sha256"]) for f in entry["files"]} == expected
        snapshot = cache / "hub" / ("models--" + repo.replace("/", "--")) / "snapshots" / entry["commit"]
        assert (snapshot.parent.parent / "refs" / "main").read_text() == entry["commit"]
        assert all(_sha256(snapshot / f) == sha for f, (_, sha) in expected.items())
    assert "HF_HUB_OFFLINE=1" in done.stdout

    # Offline: the real backend loads from the cache only; the server (still up) sees no request.
    seen = len(hub.requests)
    load = (
        "from halluflow.models import registry\n"
        f"vlm = registry.create('vlm', {{'backend': 'transformers', 'model': {SMOLVLM!r}, 'revision': 'main'}})\n"
        f"det = registry.create('detector', {{'backend': 'transformers', 'model': {OWLV2!r}}})\n"
        "print(vlm.describe().revision, type(vlm.model).__name__, type(det.model).__name__)\n"
    )
    env = {
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(cache / "hub"),
        "HALLUFLOW_MODELS_LOCK": str(cache / "models.lock.json"),
    }
    ran = subprocess.run(
        [sys.executable, "-c", load], capture_output=True, text=True, env={**os.environ, **env}, timeout=300
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split()[0] == "main"
    assert len(hub.requests) == seen
    # Control: the same load with an empty cache fails offline, so the one above read the staged cache.
    env["HF_HUB_CACHE"] = str(tmp_path / "empty")
    control = subprocess.run(
        [sys.executable, "-c", load], capture_output=True, text=True, env={**os.environ, **env}, timeout=300
    )
    assert control.returncode != 0
    assert len(hub.requests) == seen

    # The lock check passes on the untouched cache ...
    ok = _cli("models", "fetch", "--configfile", str(cfg), "--cache", str(cache), "--check")
    assert ok.returncode == 0, ok.stderr
    n_files = sum(len(m["files"]) for m in lock["models"])
    assert ok.stdout.startswith(f"{n_files} locked files match")
    # ... and refuses a tampered file in one line naming it (same size: only the hash can tell).
    weights = next(f for f in by_repo[OWLV2]["files"] if f["path"].endswith(".safetensors"))
    target = (
        cache / "hub" / "models--halluflow-test--tiny-owlv2" / "snapshots" / by_repo[OWLV2]["commit"] / weights["path"]
    )
    blob = target.resolve()
    data = bytearray(blob.read_bytes())
    data[-1] ^= 0xFF
    blob.write_bytes(bytes(data))
    bad = _cli("models", "fetch", "--configfile", str(cfg), "--cache", str(cache), "--check")
    assert bad.returncode == 1
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    assert str(target) in bad.stderr and "does not match" in bad.stderr


def test_check_lock_rehashes_a_rewritten_file(hub, tmp_path):
    from halluflow.errors import InputError
    from halluflow.models.fetch import check_lock, fetch, lock_record, merged_config

    cache = tmp_path / "cache"
    cfg = merged_config([str(_config(tmp_path, models=[]))], base=str(ROOT / "config.yaml"))
    doc = fetch(cfg, cache, log=lambda *_: None)
    assert [m["repo"] for m in doc["models"]] == [OWLV2]
    check_lock(cache / "models.lock.json")  # records the verified stamps
    record = lock_record(cache / "models.lock.json")  # what manifests and metrics files record
    assert record["models"] == {OWLV2: {"revision": "main", "commit": hub.repos[OWLV2].commit}}
    assert record["sha256"] == _sha256(cache / "models.lock.json")
    assert (cache / ".halluflow-verified.json").is_file()
    config_file = next(cache.glob("hub/models--halluflow-test--tiny-owlv2/snapshots/*/config.json")).resolve()
    config_file.write_text(config_file.read_text().replace("{", "{ ", 1))
    with pytest.raises(InputError, match="config.json: does not match"):
        check_lock(cache / "models.lock.json")


def test_gated_model_fails_in_one_line_on_authentication(hub, tmp_path):
    cfg = _config(tmp_path, models=[], synthesis={"model": GATED, "stand_in": {"enabled": False}})
    secret = "hf_thisIsNotARealTokenButMustNotLeak"
    done = _cli("models", "fetch", "--configfile", str(cfg), "--cache", str(tmp_path / "c"), env={"HF_TOKEN": secret})
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert GATED in lines[0] and "401" in lines[0]
    assert "huggingface-cli login" in lines[0] and "HF_TOKEN" in lines[0]
    assert secret not in done.stderr + done.stdout
    assert not (tmp_path / "c" / "models.lock.json").exists()
    # the token went to the server as huggingface_hub sends it (the server, not the output, sees it)
    assert any(auth == f"Bearer {secret}" for _, _, auth in hub.requests)


def test_ultralytics_plan_and_lock_entries(tmp_path, monkeypatch):
    """YOLO-World: its .pt from ultralytics' assets release and the CLIP ViT-B/32 text encoder ultralytics loads.
    No internet here: the planned files are checked, and the lock entry of an asset from a file:// URL."""
    from ultralytics.utils.downloads import attempt_download_asset

    from halluflow.errors import HalluflowError
    from halluflow.models.fetch import Asset, fetch_asset, merged_config, plan

    over = {
        "models": [],
        "detection": {"backend": "ultralytics", "model": "yolov8s-worldv2.pt", "stand_in": {"enabled": False}},
    }
    path = tmp_path / "y.yaml"
    path.write_text(yaml.safe_dump(over))
    hub_models, assets = plan(merged_config([str(path)], base=str(ROOT / "config.yaml")))
    assert [m.repo for m in hub_models] == []
    release = attempt_download_asset.__defaults__[1] if attempt_download_asset.__defaults__ else None
    by_path = {a.path: a for a in assets}
    assert set(by_path) == {"ultralytics/yolov8s-worldv2.pt", "ultralytics/clip/ViT-B-32.pt"}
    assert by_path["ultralytics/yolov8s-worldv2.pt"].url == (
        f"https://github.com/ultralytics/assets/releases/download/{release}/yolov8s-worldv2.pt"
    )
    clip = by_path["ultralytics/clip/ViT-B-32.pt"]
    assert clip.url.endswith("/ViT-B-32.pt") and clip.sha256 == clip.url.split("/")[-2]

    served = tmp_path / "served.pt"
    served.write_bytes(b"weights" * 100)
    entry = fetch_asset(Asset("ultralytics/w.pt", served.as_uri(), ["detection"]), tmp_path / "cache")
    assert entry == {
        "path": "ultralytics/w.pt",
        "url": served.as_uri(),
        "roles": ["detection"],
        "size": 700,
        "sha256": hashlib.sha256(b"weights" * 100).hexdigest(),
    }
    wrong = Asset("ultralytics/clip/x.pt", served.as_uri(), ["clip"], sha256="0" * 64)
    with pytest.raises(HalluflowError, match="is not the published"):
        fetch_asset(wrong, tmp_path / "cache")
    assert not (tmp_path / "cache" / "ultralytics/clip/x.pt").exists()


@pytest.mark.slow
def test_workflow_target_fetches_and_a_run_checks_the_lock(hub, tmp_path):
    """`snakemake models_fetch` writes the lock from the config Snakemake merged; a run with HALLUFLOW_MODELS_LOCK
    set stops at planning, in one line naming the file, once a locked file was changed."""
    from workflow_utils import copy_workflow, run_snakemake

    wf = copy_workflow(tmp_path / "wf")
    cfg = _config(tmp_path, models=[])
    cache = tmp_path / "cache"
    env = {"HALLUFLOW_MODELS_CACHE": str(cache)}
    args = ("--cores", "1", "--configfile", "configs/offline/ode-paper.yaml", str(cfg))
    run_snakemake(wf, "models_fetch", *args, env=env, timeout=600)
    lock = json.loads((cache / "models.lock.json").read_text())
    assert [m["repo"] for m in lock["models"]] == [OWLV2]
    assert "fetching halluflow-test/tiny-owlv2 @ main (detection)" in (wf / "logs/models/models_fetch.log").read_text()

    env[LOCK_ENV] = str(cache / "models.lock.json")
    ok = run_snakemake(wf, "-n", *args, env=env, timeout=600)
    assert "Job stats" in ok.stdout + ok.stderr
    entry = lock["models"][0]
    config_json = cache / "hub" / "models--halluflow-test--tiny-owlv2" / "snapshots" / entry["commit"] / "config.json"
    config_json.resolve().write_text(config_json.read_text() + " ")
    bad = run_snakemake(wf, "-n", *args, env=env, timeout=600, check=False)
    assert bad.returncode != 0
    assert f"halluflow: {config_json}: does not match" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "configs" / "offline").glob("*.yaml")))
def test_offline_try_outs_need_no_download_and_paper_configs_name_their_weights(name):
    """An offline try-out (configs/offline/X.yaml over configs/X.yaml) fetches nothing; its paper config lists a
    Hub repo or asset for every model entry it names with Hub weights."""
    from halluflow.models.fetch import merged_config, plan

    base = str(ROOT / "config.yaml")
    paper = ROOT / "configs" / f"{name}.yaml"
    assert plan(merged_config([str(paper), str(ROOT / "configs" / "offline" / f"{name}.yaml")], base=base)) == ([], [])
    config = merged_config([str(paper)], base=base)
    hub_models, _ = plan(config)
    named = {
        m["args"]["model"]
        for m in config["models"]
        if m["backend"] in ("transformers", "vllm")
        and not m.get("build")
        and str(m["args"].get("model", "")).count("/") == 1
        and not str(m["args"]["model"]).startswith(("resources/", ".", "/"))
    }
    assert named <= {m.repo for m in hub_models}


def test_pin_writes_the_locked_commits_into_a_copy_of_the_config(hub, tmp_path):
    """`--pin`: the last --configfile, its `revision: main` entries set to the commits the lock resolved; planned
    again, the pinned config names only commits and the planning warning about moving revisions is gone."""
    from halluflow.models.fetch import merged_config, plan
    from halluflow.plan import planning_warnings

    cache, cfg, pinned = tmp_path / "cache", _config(tmp_path), tmp_path / "pinned.yaml"
    base = ("models", "fetch", "--configfile", "configs/offline/ode-paper.yaml", str(cfg), "--cache", str(cache))
    done = _cli(*base, "--pin", str(pinned))
    assert done.returncode == 0, done.stderr
    commits = {repo: hub.repos[repo].commit for repo in (SMOLVLM, OWLV2)}
    assert f"pinned 2 revision(s) of {cfg} in {pinned}" in done.stdout
    layer = yaml.safe_load(pinned.read_text())
    assert layer["models"][0]["args"]["revision"] == commits[SMOLVLM]
    assert layer["models"][1] == {"name": "prior", "backend": "prior", "args": {"threshold": 0.1}}  # untouched
    assert layer["detection"]["revision"] == commits[OWLV2]
    assert pinned.read_text().startswith(f"# {cfg.name} with the revisions pinned")

    before = merged_config([str(ROOT / "configs/offline/ode-paper.yaml"), str(cfg)], base=str(ROOT / "config.yaml"))
    after = merged_config([str(ROOT / "configs/offline/ode-paper.yaml"), str(pinned)], base=str(ROOT / "config.yaml"))
    assert {(m.repo, m.revision) for m in plan(after)[0]} == set(commits.items())
    assert any("hub-smolvlm (main)" in line for line in planning_warnings(before))
    assert not any("hub-smolvlm" in line or "detection (" in line for line in planning_warnings(after))
    # --check pins from the existing lock, with no download (the server sees no request)
    seen, again = len(hub.requests), tmp_path / "again.yaml"
    checked = _cli(*base, "--check", "--pin", str(again))
    assert checked.returncode == 0, checked.stderr
    assert yaml.safe_load(again.read_text()) == layer and len(hub.requests) == seen


def _lock(path: Path, commit: str) -> Path:
    doc = {"version": 1, "models": [{"repo": SMOLVLM, "revision": "main", "commit": commit, "files": []}]}
    path.write_text(json.dumps(doc))
    return path


def test_answer_cache_and_model_records_key_on_the_locked_commit(tmp_path, monkeypatch):
    """With a lock in use the request cache keys on the commit it staged, not the requested `main`: a lock whose
    commit moved gives other keys (a rerun asks again); a served model with the same id is not the lock's."""
    from halluflow.answer import ModelUnderTest
    from halluflow.backends.base import BackendInfo

    spec = {"name": "hub-smolvlm", "backend": "transformers", "args": {"model": SMOLVLM, "revision": "main"}}
    served = {"name": "api", "backend": "openai", "args": {"base_url": "http://x/v1", "model": SMOLVLM}}
    monkeypatch.delenv(LOCK_ENV, raising=False)
    unlocked = ModelUnderTest(spec).key_fields()
    served_key = ModelUnderTest(served).key_fields()
    assert unlocked["revision"] == "main"
    keys = {}
    for commit in ("a" * 40, "b" * 40):
        monkeypatch.setenv(LOCK_ENV, str(_lock(tmp_path / f"{commit[0]}.json", commit)))
        keys[commit] = ModelUnderTest(spec).key_fields()
        assert keys[commit]["revision"] == commit
        assert ModelUnderTest(served).key_fields() == served_key
        info = BackendInfo("vlm", "transformers", SMOLVLM, "main")
        assert info.as_dict()["commit"] == commit
        assert "commit" not in BackendInfo("vlm", "openai", SMOLVLM, None).as_dict()
    assert len({str(k) for k in (unlocked, *keys.values())}) == 3


@pytest.mark.slow
def test_a_moved_lock_commit_misses_the_answer_cache(hub, tmp_path):
    """End to end, offline on the staged cache: the same answer run again hits its cache; with the lock's commit
    changed (a re-fetch after `main` moved) every request is asked again."""
    cache = tmp_path / "cache"
    staged = _cli("models", "fetch", "--configfile", str(_config(tmp_path)), "--cache", str(cache))
    assert staged.returncode == 0, staged.stderr
    pope = write_pope_set(tmp_path / "pope")
    argv = ["answer", "run", "--source", "pope", "--questions", str(pope / "pope.jsonl"), "--images"]
    argv += [str(pope / "images"), "--backend", "transformers", "--arg", f"model={SMOLVLM}", "--arg", "revision=main"]
    argv += ["--arg", "device=cpu", "--out", str(tmp_path / "a.jsonl"), "--cache", str(tmp_path / "answers")]
    env = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache / "hub")}

    def run(lock_path: Path) -> dict:
        done = _cli(*argv, env={**env, LOCK_ENV: str(lock_path)})
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    locked = cache / "models.lock.json"
    first = run(locked)
    assert first["new"] == first["queries"] > 0 and first["cache_hits"] == 0
    assert run(locked)["cache_hits"] == first["queries"]
    moved = json.loads(locked.read_text())
    entry = next(m for m in moved["models"] if m["repo"] == SMOLVLM)
    entry["commit"] = "f" * 40
    (tmp_path / "moved.json").write_text(json.dumps(moved))
    again = run(tmp_path / "moved.json")
    assert again["cache_hits"] == 0 and again["new"] == first["queries"]

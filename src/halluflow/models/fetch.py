"""Stage every weight a config names into one cache, lock what was staged, and check the lock where jobs run.

Compute nodes of most clusters have no internet. `halluflow models fetch` runs on a machine that has it: it reads
the merged config (the workflow's config.yaml, then each --configfile, as Snakemake merges them), lists every model
the planned stages load — Hub repos (models under test on the transformers / blind / vllm backends, the synthesizer
and detector when their stand-in is off, the `llm:` blocks, inline CAOS oracle members) and ultralytics files (the
detector weights and, for YOLO-World, the CLIP ViT-B/32 text encoder ultralytics loads through OpenAI's `clip`) —
downloads them with `huggingface_hub.snapshot_download` (pinned to the commit the requested revision resolved to)
and ultralytics' own asset fetcher, and writes a lock: per model the repo id, the requested revision, the resolved
commit and every file with its size and sha256. Jobs then run with HF_HUB_OFFLINE=1 against that cache, and
`check_lock` refuses a cached file whose sha256 is not the locked one, in one line naming the file. `--pin FILE`
writes a copy of the last --configfile with each revision the lock resolved replaced by its commit, so a config on
`revision: main` is pinned in one step; `locked_commit` gives the commit a run's lock holds for a repo (the answer
cache keys on it and model descriptions record it).

Stand-ins (`build:` blocks, `stand_in.enabled`), servers (`openai`), the prior and the packaged embedders (GloVe,
MiniLM) download nothing and are not listed.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import re
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..errors import ConfigError, HalluflowError, InputError
from ..io import sha256_file

LOCK_NAME = "models.lock.json"
LOCK_VERSION = 1
HUB_SUBDIR = "hub"  # HF_HUB_CACHE of the jobs: <cache>/hub
ULTRALYTICS_SUBDIR = "ultralytics"  # ultralytics' weights_dir of the jobs: <cache>/ultralytics
# Environment variable naming the lock a workflow run checks (rules/models.smk) and manifests record.
LOCK_ENV = "HALLUFLOW_MODELS_LOCK"
# The weights `ultralytics.nn.text_model.CLIP("ViT-B/32")` loads with OpenAI's clip.load(download_root=weights_dir/clip):
# clip.load checks the file's sha256 against the hex folder of this URL, so the lock can name it before download.
CLIP_VIT_B32_URL = (
    "https://openaipublic.azureedge.net/clip/models/"
    "40d365715913c9da98579312b702a82c18be219cc2a73407c4526f58eba950af/ViT-B-32.pt"
)
# Backends that load Hub weights by id (the served `openai` backend and the `prior` load none here).
HUB_BACKENDS = ("transformers", "blind", "vllm")
_COMMIT = re.compile(r"^[0-9a-f]{40}\Z")
_AUTH_HELP = (
    "accept its terms on its Hub page if it is gated, then authenticate: `huggingface-cli login` (or `hf auth login`)"
    " or set the HF_TOKEN environment variable"
)


@dataclass
class HubModel:
    repo: str
    revision: str  # as requested ("main" when the config pins none)
    roles: list[str] = field(default_factory=list)  # config keys that name it


@dataclass
class Asset:
    path: str  # relative to the cache folder
    url: str
    roles: list[str] = field(default_factory=list)
    sha256: str | None = None  # known before download (the CLIP URL carries it)


# ---- what a config names ----------------------------------------------------------------------------------------


def merged_config(configfiles: list[str], base: str | None = "config.yaml") -> dict:
    """The config a workflow run sees: `base` (when it exists) then each file left to right, schema defaults filled."""
    from ..config import merge_config, read_config_file, validate_config

    config: dict = {}
    for name in ([base] if base and Path(base).is_file() else []) + list(configfiles):
        config = merge_config(config, read_config_file(name))
    return validate_config(config)


def _hub_id(model) -> str | None:
    """`model` when it is a Hub repo id (org/name, or a legacy bare name), None for a local folder or nothing."""
    from . import _is_local

    if not isinstance(model, str) or not model or _is_local(model) or model.count("/") > 1:
        return None
    return model


def _ultralytics_release() -> str:
    """The assets release the installed ultralytics downloads from (attempt_download_asset's default)."""
    from ultralytics.utils.downloads import attempt_download_asset

    return inspect.signature(attempt_download_asset).parameters["release"].default


def plan(config: dict) -> tuple[list[HubModel], list[Asset]]:
    """Every Hub repo and ultralytics file the config's planned stages load, each once with the keys naming it."""
    from . import generators, oracle_members

    hub: dict[tuple[str, str], HubModel] = {}
    assets: dict[str, Asset] = {}

    def add(role: str, model, revision) -> None:
        repo = _hub_id(model)
        if repo:
            entry = hub.setdefault((repo, str(revision or "main")), HubModel(repo, str(revision or "main")))
            entry.roles.append(role)

    def add_spec(role: str, spec: dict) -> None:
        args = spec.get("args") or {}
        if spec.get("backend") in HUB_BACKENDS and not spec.get("build"):
            add(role, args.get("model"), args.get("revision"))

    for spec in config.get("models") or []:
        add_spec(f"models.{spec.get('name')}", spec)
    caos = config.get("caos") or {}
    if caos.get("oracle"):
        for i, spec in enumerate(oracle_members(config)):
            add_spec(f"caos.oracle.members.{i}", spec)
    for key, block in (
        ("llm", config.get("llm")),
        ("caos.llm", caos.get("llm")),
        ("cedi.llm", (config.get("cedi") or {}).get("llm")),
    ):
        if isinstance(block, dict) and block.get("backend", "transformers") in HUB_BACKENDS:
            args = block["args"] if isinstance(block.get("args"), dict) else block
            add(key, args.get("model"), args.get("revision"))
    synthesis = config.get("synthesis")
    if synthesis:
        for gen in generators(synthesis):
            if not gen["stand_in"]["enabled"]:
                add(f"synthesis ({gen['name']})", gen.get("model"), gen.get("revision"))
    detection = config.get("detection")
    if detection and not detection["stand_in"]["enabled"]:
        if detection.get("backend") == "ultralytics":
            _add_ultralytics(assets, str(detection["model"]))
        else:
            add("detection", detection.get("model"), detection.get("revision"))
    return list(hub.values()), list(assets.values())


def _add_ultralytics(assets: dict[str, Asset], model: str) -> None:
    """The detector's .pt (a bare asset name ultralytics would download) and, for a YOLO-World model, the CLIP
    ViT-B/32 text encoder its set_classes builds (ultralytics WorldModel: build_text_model("clip:ViT-B/32"))."""
    role = "detection"
    if Path(model).name == model and model.endswith(".pt"):
        url = f"https://github.com/ultralytics/assets/releases/download/{_ultralytics_release()}/{model}"
        assets.setdefault(model, Asset(f"{ULTRALYTICS_SUBDIR}/{model}", url)).roles.append(role)
    if "world" in Path(model).name.lower():
        sha = CLIP_VIT_B32_URL.rsplit("/", 2)[-2]
        clip = assets.setdefault("clip", Asset(f"{ULTRALYTICS_SUBDIR}/clip/ViT-B-32.pt", CLIP_VIT_B32_URL, sha256=sha))
        clip.roles.append(f"{role} (YOLO-World text encoder)")


# ---- downloading ------------------------------------------------------------------------------------------------


def _hub_error(exc: Exception, repo: str, revision: str, endpoint: str) -> HalluflowError:
    """One line for a Hub refusal; the token (if any) is never part of it."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, RevisionNotFoundError):
        return ConfigError(f"model {repo!r}: revision {revision!r} does not exist on {endpoint}")
    if isinstance(exc, GatedRepoError) or status in (401, 403):
        token = "with the token given" if os.environ.get("HF_TOKEN") else "without a token"
        return ConfigError(f"model {repo!r}: {endpoint} refused access (HTTP {status}) {token}; {_AUTH_HELP}")
    if isinstance(exc, RepositoryNotFoundError):
        return ConfigError(f"model {repo!r}: no such repository on {endpoint} (HTTP {status})")
    if isinstance(exc, HfHubHTTPError):
        return HalluflowError(f"model {repo!r}: {endpoint} answered HTTP {status}; try again later")
    return HalluflowError(f"model {repo!r}: cannot reach {endpoint} ({type(exc).__name__}: {exc})")


def _storage_folder(hub_cache: Path, repo: str) -> Path:
    return hub_cache / ("models--" + repo.replace("/", "--"))


def fetch_hub_model(model: HubModel, hub_cache: Path, endpoint: str) -> dict:
    """Download one repo at the commit its revision resolves to now; its lock entry (files hashed from the cache)."""
    import httpx  # noqa: F401 - huggingface_hub's transport; imported so a missing one fails here, named
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.hf_api import RepoFile

    api = HfApi(endpoint=endpoint)
    try:
        commit = (
            model.revision if _COMMIT.match(model.revision) else api.repo_info(model.repo, revision=model.revision).sha
        )
        listed = {
            f.path: f
            for f in api.list_repo_tree(model.repo, revision=commit, recursive=True)
            if isinstance(f, RepoFile)
        }
        folder = Path(snapshot_download(model.repo, revision=commit, cache_dir=str(hub_cache), endpoint=endpoint))
    except Exception as exc:  # noqa: BLE001 - every Hub failure becomes one line naming the repo
        if isinstance(exc, HalluflowError):
            raise
        raise _hub_error(exc, model.repo, model.revision, endpoint) from None
    if commit != model.revision:
        # snapshot_download pinned to a commit writes no ref: record the requested branch/tag so
        # from_pretrained(repo, revision=<it>) resolves offline to exactly this snapshot.
        ref = _storage_folder(hub_cache, model.repo) / "refs" / model.revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)
    files = []
    for path in sorted(listed):
        local = folder / path
        if not local.is_file():
            raise HalluflowError(f"model {model.repo!r}: {path} was listed by the hub but not downloaded")
        digest = sha256_file(local)
        lfs = listed[path].lfs
        if lfs is not None and lfs.sha256 != digest:
            raise HalluflowError(
                f"model {model.repo!r}: {path} downloaded with sha256 {digest[:12]}…, the hub lists {lfs.sha256[:12]}…"
                " (a broken download; run again)"
            )
        files.append({"path": path, "size": local.stat().st_size, "sha256": digest})
    return {
        "repo": model.repo,
        "revision": model.revision,
        "commit": commit,
        "roles": sorted(set(model.roles)),
        "files": files,
    }


def _download_url(url: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as resp:  # noqa: S310 - https URLs
            shutil.copyfileobj(resp, out, 1 << 22)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def fetch_asset(asset: Asset, cache: Path) -> dict:
    dest = cache / asset.path
    if not dest.is_file():
        try:
            _download_url(asset.url, dest)
        except OSError as exc:
            raise HalluflowError(f"{asset.url}: download failed ({exc})") from None
    digest = sha256_file(dest)
    if asset.sha256 and digest != asset.sha256:
        dest.unlink()
        raise HalluflowError(f"{asset.url}: sha256 {digest[:12]}… is not the published {asset.sha256[:12]}…; removed")
    return {
        "path": asset.path,
        "url": asset.url,
        "roles": sorted(set(asset.roles)),
        "size": dest.stat().st_size,
        "sha256": digest,
    }


def fetch(config: dict, cache: str | os.PathLike, lock: str | os.PathLike | None = None, log=print) -> dict:
    """Stage every model of `config` into `cache` and write the lock (default <cache>/models.lock.json)."""
    import logging

    from .. import __version__
    from ..io import write_json

    # One INFO line per HTTP request (HEAD + GET per file) would bury the one line per model this prints.
    for name in ("httpx", "httpx2", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.WARNING)
    cache = Path(cache)
    lock = Path(lock) if lock else cache / LOCK_NAME
    endpoint = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    hub_models, assets = plan(config)
    entries, asset_entries = [], []
    for model in hub_models:
        log(f"fetching {model.repo} @ {model.revision} ({', '.join(model.roles)})")
        entries.append(fetch_hub_model(model, cache / HUB_SUBDIR, endpoint))
    for asset in assets:
        log(f"fetching {asset.url} -> {asset.path}")
        asset_entries.append(fetch_asset(asset, cache))
    doc = {
        "version": LOCK_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "halluflow": __version__,
        "endpoint": endpoint,
        "hub_cache": HUB_SUBDIR,
        "models": entries,
        "assets": asset_entries,
    }
    write_json(lock, doc)
    return doc


# ---- checking the lock where jobs run -----------------------------------------------------------------------------


def read_lock(lock: str | os.PathLike) -> dict:
    path = Path(lock)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such lock file (run `halluflow models fetch` first)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a models lock ({exc})") from None
    if not isinstance(doc, dict) or doc.get("version") != LOCK_VERSION or not isinstance(doc.get("models"), list):
        raise InputError(f"{path}: not a version-{LOCK_VERSION} models lock written by `halluflow models fetch`")
    return doc


def locked_files(doc: dict, cache: Path) -> list[tuple[Path, int, str]]:
    """(cached path, size, sha256) of every locked file."""
    hub = cache / doc.get("hub_cache", HUB_SUBDIR)
    out = []
    for model in doc["models"]:
        snapshot = _storage_folder(hub, model["repo"]) / "snapshots" / model["commit"]
        out += [(snapshot / f["path"], f["size"], f["sha256"]) for f in model["files"]]
    out += [(cache / a["path"], a["size"], a["sha256"]) for a in doc.get("assets", [])]
    return out


_VERIFIED = ".halluflow-verified.json"  # per-file (size, mtime_ns, inode) -> sha256 already checked


def _verified_record(cache: Path) -> Path:
    """Where the check stamps live: in the cache, or — for a read-only shared cache, which would otherwise be
    hashed again by every job — in the user's cache folder, one file per cache path."""
    if os.access(cache, os.W_OK):
        return cache / _VERIFIED
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "halluflow"
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError:
        return cache / _VERIFIED  # nowhere writable: every check hashes again
    return home / f"verified-{hashlib.sha256(str(cache.resolve()).encode()).hexdigest()[:16]}.json"


def check_lock(lock: str | os.PathLike, cache: str | os.PathLike | None = None) -> dict:
    """Refuse, in one line naming the file, a locked file that is missing or whose sha256 is not the locked one.

    Hashing tens of GB on every workflow start would cost minutes, so a file whose size, mtime and inode are those it
    had when last checked is not hashed again (the record lives in the cache folder, or the user's for a read-only cache); any write to it
    re-hashes it."""
    doc = read_lock(lock)
    cache = Path(cache) if cache else Path(lock).parent
    record_path = _verified_record(cache)
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    fresh = {}
    for path, size, sha in locked_files(doc, cache):
        try:
            st = path.stat()  # follows the snapshot symlink to its blob
        except FileNotFoundError:
            raise InputError(
                f"{path}: locked in {lock} but missing from the cache; run `halluflow models fetch`"
            ) from None
        key = str(path)
        stamp = [st.st_size, st.st_mtime_ns, st.st_ino, sha]
        if record.get(key) != stamp:
            digest = sha256_file(path) if st.st_size == size else None
            if digest != sha:
                raise InputError(
                    f"{path}: does not match {lock} (sha256 {digest[:12] + '…' if digest else 'n/a'}, size "
                    f"{st.st_size}; locked {sha[:12]}…, size {size}); the cached file was changed — refusing it"
                )
        fresh[key] = stamp
    try:
        tmp = record_path.with_name(f"{_VERIFIED}.{os.getpid()}.part")
        tmp.write_text(json.dumps(fresh), encoding="utf-8")
        os.replace(tmp, record_path)
    except OSError:
        pass  # nowhere writable: checked again next time, never wrong
    return doc


def offline_env(cache: str | os.PathLike, lock: str | os.PathLike | None = None) -> dict[str, str]:
    """The environment a job needs to load only the staged weights (what rules/models.smk sets)."""
    cache = Path(cache).resolve()
    return {
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(cache / HUB_SUBDIR),
        LOCK_ENV: str(Path(lock).resolve() if lock else cache / LOCK_NAME),
    }


def lock_record(lock: str | os.PathLike | None = None) -> dict | None:
    """What a release manifest and a metrics file record of the lock their run checked (HALLUFLOW_MODELS_LOCK, or
    `lock`): its sha256 and, per Hub repo, the requested revision and the commit loaded; per asset its sha256.
    None when the run used no lock (then the requested revisions alone are recorded, beside each model)."""
    lock = lock or os.environ.get(LOCK_ENV)
    if not lock:
        return None
    doc = read_lock(lock)
    return {
        "sha256": sha256_file(lock),
        "models": {m["repo"]: {"revision": m["revision"], "commit": m["commit"]} for m in doc["models"]},
        "assets": {a["path"]: a["sha256"] for a in doc.get("assets", [])},
    }


@functools.lru_cache(maxsize=8)
def _lock_commits(path: str, mtime_ns: int) -> dict[tuple[str, str], str]:
    return {(m["repo"], m["revision"]): m["commit"] for m in read_lock(path)["models"]}


def locked_commit(repo, revision=None, lock: str | os.PathLike | None = None) -> str | None:
    """The commit the run's lock (HALLUFLOW_MODELS_LOCK, or `lock`) staged `repo` at for the requested `revision`
    (None: main); None without a lock or for a model the lock does not hold (a local folder, a served id)."""
    lock = lock or os.environ.get(LOCK_ENV)
    if not lock or not isinstance(repo, str):
        return None
    path = Path(lock)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        read_lock(path)  # the one-line "no such lock file"
        raise
    return _lock_commits(str(path), mtime).get((repo, str(revision or "main")))


def pin_config(configfile: str | os.PathLike, doc: dict, out: str | os.PathLike) -> list[str]:
    """Write `configfile` to `out` with every Hub model's revision set to the commit the lock `doc` resolved it to
    (a served `openai` model keeps its arguments: its weights are the server's). Returns "repo @ commit" per change.
    YAML comments do not survive the rewrite; the file's first lines say where it came from."""
    import yaml

    from ..config import read_config_file
    from ..io import write_text

    commits = {(m["repo"], m["revision"]): m["commit"] for m in doc["models"]}
    layer = read_config_file(configfile)
    changed: list[str] = []

    def walk(node, backend=None) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, backend)
            return
        if not isinstance(node, dict):
            return
        backend = node.get("backend", backend)
        repo = node.get("model")
        if isinstance(repo, str) and (backend is None or backend in HUB_BACKENDS):
            commit = commits.get((repo, str(node.get("revision") or "main")))
            if commit and node.get("revision") != commit:
                node["revision"] = commit
                changed.append(f"{repo} @ {commit}")
        for value in node.values():
            walk(value, backend)

    walk(layer)
    header = (
        f"# {Path(configfile).name} with the revisions pinned to the commits `halluflow models fetch` staged\n"
        f"# (lock sha256 {doc.get('sha256', '?')[:12]}…, endpoint {doc.get('endpoint')}); written by --pin.\n"
    )
    write_text(out, header + yaml.safe_dump(layer, sort_keys=False, allow_unicode=True))
    return changed

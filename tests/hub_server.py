"""A local stand-in for the part of the Hugging Face Hub HTTP API that `huggingface_hub` downloads with.

It serves model folders from disk on 127.0.0.1 only and stops by itself after `lifetime_s`. Endpoints, as
huggingface_hub's HfApi.repo_info / list_repo_tree and file_download.get_hf_file_metadata / http_get call them:
  GET  /api/models/{repo}/revision/{rev}     -> {"id", "sha", "siblings": [{"rfilename"}]}
  GET  /api/models/{repo}/tree/{rev}?recursive -> [{"type": "file", "path", "size", "oid", "lfs"?}]
  HEAD /{repo}/resolve/{rev}/{file}          -> X-Repo-Commit, ETag / X-Linked-Etag, X-Linked-Size, Content-Length
  GET  /{repo}/resolve/{rev}/{file}          -> the bytes
Files over LFS_MIN bytes are listed as LFS files (etag = their sha256), as the Hub stores weights. A repo in `gated`
answers 401 with X-Error-Code: GatedRepo to every request, as the Hub does without a token. Every request is logged
in `requests` so a test can assert that nothing reached the server.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_MIN = 1024


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, folder: Path):
        self.files: dict[str, bytes] = {
            p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
        }
        listing = "".join(f"{k}\0{hashlib.sha256(v).hexdigest()}\n" for k, v in self.files.items())
        self.commit = hashlib.sha1(listing.encode()).hexdigest()

    def entry(self, path: str) -> dict:
        data = self.files[path]
        if len(data) >= LFS_MIN:
            sha = hashlib.sha256(data).hexdigest()
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(data)}\n".encode()
            return {
                "type": "file",
                "path": path,
                "size": len(data),
                "oid": _git_blob_sha1(pointer),
                "lfs": {"oid": sha, "size": len(data), "pointerSize": len(pointer)},
            }
        return {"type": "file", "path": path, "size": len(data), "oid": _git_blob_sha1(data)}


class HubServer:
    def __init__(self, repos: dict[str, Path], gated: tuple[str, ...] = (), lifetime_s: float = 300.0):
        self.repos = {name: Repo(folder) for name, folder in repos.items()}
        self.gated = set(gated)
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Authorization header)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet: the test reads `requests`
                pass

            def do_HEAD(self):
                server._handle(self, body=False)

            def do_GET(self):
                server._handle(self, body=True)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._timer = threading.Timer(lifetime_s, self.stop)  # never outlives a hung test
        self._timer.daemon = True

    def __enter__(self):
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- request handling --
    def _send(self, h, status: int, body: bytes = b"", headers: dict | None = None, send_body: bool = True):
        h.send_response(status)
        for key, value in (headers or {}).items():
            h.send_header(key, str(value))
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if send_body and body:
            h.wfile.write(body)

    def _json(self, h, obj, send_body: bool, status: int = 200):
        self._send(h, status, json.dumps(obj).encode(), {"Content-Type": "application/json"}, send_body)

    def _error(self, h, status: int, code: str, message: str, send_body: bool):
        headers = {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"}
        self._send(h, status, json.dumps({"error": message}).encode(), headers, send_body)

    def _repo(self, parts: list[str]) -> tuple[str | None, list[str]]:
        """Split path parts into (repo id "org/name", rest)."""
        if len(parts) < 2:
            return None, []
        return f"{parts[0]}/{parts[1]}", parts[2:]

    def _handle(self, h, body: bool) -> None:
        path = urlsplit(h.path).path
        self.requests.append((h.command, path, h.headers.get("Authorization")))
        parts = [unquote(p) for p in path.strip("/").split("/")]
        api = parts[:2] == ["api", "models"]
        repo_id, rest = self._repo(parts[2:] if api else parts)
        if repo_id in self.gated:
            message = f"Access to model {repo_id} is restricted. You must have access to it and be authenticated."
            return self._error(h, 401, "GatedRepo", message, body)
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._error(h, 404, "RepoNotFound", "Repository not found", body)
        if api and len(rest) >= 2 and rest[0] in ("revision", "tree"):
            if rest[1] not in ("main", repo.commit):
                return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rest[1]}", body)
            if rest[0] == "revision":
                siblings = [{"rfilename": p} for p in repo.files]
                return self._json(h, {"id": repo_id, "sha": repo.commit, "siblings": siblings}, body)
            return self._json(h, [repo.entry(p) for p in repo.files], body)
        if not api and len(rest) >= 3 and rest[0] == "resolve":
            rev, file = rest[1], "/".join(rest[2:])
            if rev not in ("main", repo.commit):
                return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}", body)
            if file not in repo.files:
                return self._error(h, 404, "EntryNotFound", f"{file} does not exist", body)
            entry = repo.entry(file)
            headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{entry["oid"]}"', "Accept-Ranges": "bytes"}
            if "lfs" in entry:
                headers["X-Linked-Etag"] = f'"{entry["lfs"]["oid"]}"'
                headers["X-Linked-Size"] = entry["size"]
            return self._send(h, 200, repo.files[file], headers, body)
        return self._error(h, 404, "EntryNotFound", f"no route for {path}", body)

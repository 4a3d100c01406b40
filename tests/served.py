"""A REAL OpenAI-compatible server for tests: `transformers serve` (transformers' own FastAPI server) on 127.0.0.1,
serving the offline stand-ins — the tiny random SmolVLM (as the model under test and CAOS oracle) and the REAL
SmolLM2-135M-Instruct (as the `llm` role) — from one process that loads each model on first request.

The served model ids are the model folders relative to the server's working directory, exactly as the
configs/offline/openai-server.yaml recipe starts it from a clone's root.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

VLM_ID = "resources/models/tiny-smolvlm"
LLM_ID = "resources/models/smollm2-135m-instruct"
SERVE_PACKAGES = ("fastapi", "uvicorn", "openai", "pydantic")


def missing_serve_packages() -> list[str]:
    return [p for p in SERVE_PACKAGES if importlib.util.find_spec(p) is None]


def build_served_models(root: Path) -> Path:
    """The two model folders under root/resources/models, built as the default workflow builds them."""
    from halluflow.models.packaged import convert_packaged_llm
    from halluflow.models.standins import build_standin

    if not (root / VLM_ID / "config.json").exists():
        # config.yaml's tiny-smolvlm entry: build {builder: smolvlm, seed: 0, args: {hidden_size: 32, image_size: 64}}
        build_standin("smolvlm", root / VLM_ID, seed=0, hidden_size=32, image_size=64)
    convert_packaged_llm(root / LLM_ID)
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TransformersServe:
    """`transformers serve` as a child process: started on a free port, polled until GET /v1/models answers, stopped
    (SIGTERM, then SIGKILL) on exit. Its log is kept in `log_path` so tests can count requests per model."""

    def __init__(self, root: Path, startup_s: float = 180.0):
        self.root = Path(root)
        self.port = free_port()
        self.log_path = self.root / f"transformers-serve-{self.port}.log"
        self.startup_s = startup_s
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def requests_for(self, model_id: str) -> int:
        """Chat requests the server received for one model (its log line per request)."""
        return self.log_path.read_text(errors="replace").count(f"[Request received] Model: {model_id},")

    def __enter__(self):
        exe = shutil.which("transformers", path=str(Path(sys.executable).parent)) or "transformers"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    exe,
                    "serve",
                    "--device",
                    "cpu",
                    "--dtype",
                    "float32",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--log-level",
                    "info",
                ],
                cwd=self.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        self.__exit__(None, None, None)
        raise RuntimeError(f"transformers serve not ready after {self.startup_s:g} s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def __exit__(self, *exc):
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)  # the server's own process group (start_new_session)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)

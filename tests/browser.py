"""Headless Chromium for the tests that render a page (tests only): found, or skipped (failed under CI)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--enable-logging=stderr",
    "--v=0",
    "--hide-scrollbars",
)


def require_chromium() -> Path:
    """Chromium's path; skips the test when it is absent, unless HALLUFLOW_REQUIRE_BROWSER=1 (CI installs it and
    sets that, so a failed install cannot pass as a skip)."""
    if not CHROMIUM.exists():
        if os.environ.get("HALLUFLOW_REQUIRE_BROWSER") == "1":
            pytest.fail(f"HALLUFLOW_REQUIRE_BROWSER=1 but {CHROMIUM} is absent")
        pytest.skip(f"{CHROMIUM} absent (apt-get install chromium) — headless render test skipped")
    return CHROMIUM


def chromium(url: str, *extra: str, profile: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    """Run headless Chromium on `url` with its own profile folder (`extra`: --dump-dom, --screenshot=...)."""
    return subprocess.run(
        [str(require_chromium()), *FLAGS, f"--user-data-dir={profile}", *extra, url],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def console_errors(proc: subprocess.CompletedProcess) -> list[str]:
    """The page's console errors Chromium logged to stderr."""
    return [
        line for line in proc.stderr.splitlines() if "CONSOLE" in line and ("ERROR" in line or "error" in line.lower())
    ]

"""Fixtures only (plus pytest hooks): the default run, the served model, torch on one thread, hand-made releases.
Plain helpers and constants (REPO, SHARED_DATA, shared_data(), ...) live in tests/helpers.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# Tests write only in the clone and temp folders: caches that libraries create in the user's home (matplotlib's font
# cache, Hugging Face's, anything under ~/.cache) go to a temp folder for this test run, set before any import.
_CACHE = Path(tempfile.mkdtemp(prefix="halluflow-tests-cache-"))
for _var, _sub in (("XDG_CACHE_HOME", "xdg"), ("MPLCONFIGDIR", "matplotlib"), ("HF_HOME", "huggingface")):
    os.environ.setdefault(_var, str(_CACHE / _sub))


# Test modules that share a session fixture run on one xdist worker (a session fixture is built once per worker):
# the default run (the README's main job), the served model, the Slurm cluster.
WORKER_GROUPS = {
    "test_workflow.py": "default_run",
    "test_crash_resume.py": "default_run",
    "test_configs.py": "default_run",
    "test_validity.py": "default_run",
    "test_served.py": "served",
    "test_slurm.py": "slurm",
    "test_wheel.py": "wheel",  # the installed wheel (built once)
}


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per core, at most 2 — each worker may hold a torch model and run Snakemake jobs."""
    return max(1, min(2, os.cpu_count() or 1))


def pytest_xdist_make_scheduler(config, log):
    """Load balancing test by test, except that each group of WORKER_GROUPS goes to one worker as a whole
    (pytest-xdist's own `xdist_group` marks do not reach the scheduler under pytest 9)."""
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return WORKER_GROUPS.get(nodeid.split("::", 1)[0].rsplit("/", 1)[-1], nodeid)

    return SharedFixtureScheduling(config, log)


def _slurm_probe_warning() -> str | None:
    """Why every `snakemake` call of the workflow tests would wait 10 s: the Slurm executor plugin runs
    `scontrol show config` (10 s timeout) whenever Snakemake starts, and a Slurm client whose controller does not
    answer (installed, cluster stopped) makes it wait the whole timeout."""
    if not shutil.which("scontrol"):
        return None
    try:
        subprocess.run(["scontrol", "show", "config"], capture_output=True, timeout=3)
    except subprocess.TimeoutExpired:
        return (
            "scontrol is installed but no Slurm controller answers: every snakemake call waits 10 s for the Slurm "
            "plugin's probe. Start the cluster (tools/slurm/local-cluster.sh start; its `stop` makes the probe fail "
            "at once) or remove slurm-client."
        )
    return None


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # once, in the main process
        config._halluflow_slurm_warning = _slurm_probe_warning()


def pytest_terminal_summary(terminalreporter, config):
    warning = getattr(config, "_halluflow_slurm_warning", None)
    if warning:
        terminalreporter.section("halluflow: slow snakemake starts", yellow=True)
        terminalreporter.write_line(warning)


@pytest.fixture
def repo() -> Path:
    from helpers import REPO  # imported here: helpers imports halluflow, after the cache folders above are set

    return REPO


@pytest.fixture(scope="session")
def default_run(tmp_path_factory):
    """The whole default workflow (`snakemake --cores 2`), run once per test session in a scratch clone."""
    import time

    from workflow_utils import copy_workflow, run_snakemake

    workdir = copy_workflow(tmp_path_factory.mktemp("default-run"))
    start = time.monotonic()
    proc = run_snakemake(workdir, "--cores", "2")
    return {"dir": workdir, "proc": proc, "seconds": time.monotonic() - start}


@pytest.fixture(scope="module")
def one_torch_thread():
    """Torch on one thread for a test module: on a shared CPU torch's default pool spin-waits against other
    processes (10-30x slower). Use with `pytestmark = pytest.mark.usefixtures("one_torch_thread")`."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _transformers_log_to_live_stderr():
    """transformers' own log handler keeps the sys.stderr (and its flush) of the moment transformers was imported.
    When that import happens inside a `capsys` test, the handler holds that test's capture stream, closed when the
    test ends, and every later transformers warning in the worker prints '--- Logging error --- ... I/O operation on
    closed file' with a traceback into whatever stderr the next test captures. Each test starts with the handler on
    the live sys.stderr (the session's capture), so a transformers warning never lands in another test's capsys."""
    hf_logging = sys.modules.get("transformers.utils.logging")
    handler = getattr(hf_logging, "_default_handler", None)
    if handler is not None and getattr(handler, "stream", None) is not sys.stderr:
        handler.flush = sys.stderr.flush  # transformers binds flush to the stream it saw (not set through setStream)
        handler.stream = sys.stderr
    yield


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """A real OpenAI-compatible server (`transformers serve`, tests/served.py) with the tiny stand-ins, started once
    per test session for every test that needs one."""
    from served import TransformersServe, build_served_models, missing_serve_packages

    missing = missing_serve_packages()
    if missing:
        pytest.skip(f"transformers serve needs {missing}: pip install 'halluflow[serve]'")
    root = build_served_models(tmp_path_factory.mktemp("served"))
    with TransformersServe(root) as server:
        yield server


@pytest.fixture
def release(tmp_path):
    """A packaged release: two images (dog+frisbee, car+road), yes/no and generative queries."""
    from helpers import make_packaged_release

    return make_packaged_release(tmp_path)


@pytest.fixture
def ode_release(tmp_path):
    """A tiny hand-made ODE release and its scene graph: (release folder, graph folder)."""
    from helpers import make_ode_release

    return make_ode_release(tmp_path)


@pytest.fixture(scope="module")
def vlm_family_dirs(tmp_path_factory):
    """Tiny random stand-ins of the five VLM families (halluflow.backends.tiny_vlms), built offline once per module."""
    from helpers import VLM_FAMILIES

    from halluflow.models.standins import build_standin

    root = tmp_path_factory.mktemp("vlm-families")
    return {kind: build_standin(kind, root / kind, seed=0) for kind in VLM_FAMILIES}


@pytest.fixture(scope="module")
def prior(tmp_path_factory):
    """The co-occurrence prior VLM on helpers.make_graph's graph (the model behind tests/chat_server.py)."""
    from helpers import make_graph

    from halluflow.models import registry

    graph = make_graph(tmp_path_factory.mktemp("graph"))
    return registry.create("vlm", {"backend": "prior", "graph": str(graph)})


@pytest.fixture
def workdir(tmp_path):
    """A scratch workflow clone holding the static POPE set of helpers.write_pope_set under static/."""
    from helpers import write_pope_set
    from workflow_utils import copy_workflow

    work = copy_workflow(tmp_path / "wf")
    write_pope_set(work / "static")
    return work

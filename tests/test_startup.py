"""Parse time stays light: every `snakemake` call runs rules/common.smk's imports and the SAMF judge / group
helpers while building the DAG, so those must not import the libraries only jobs need (bench/bench_startup.py
measures the cost; speed itself is not asserted here)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOB_ONLY = ("polars", "PIL", "torch", "transformers", "diffusers", "matplotlib", "tqdm", "networkx", "scipy")


def test_dag_time_code_imports_no_job_library():
    common = (REPO / "rules" / "common.smk").read_text(encoding="utf-8")
    imports = [ln for ln in common.splitlines() if re.match(r"from halluflow\S* import ", ln)]
    assert any("samf.workflow" in ln for ln in imports), "rules/common.smk no longer imports the SAMF helpers"
    code = "\n".join(
        [
            "import sys, yaml",
            *imports,
            "from halluflow.samf.workflow import groups_for",
            f"config = validate_config(yaml.safe_load(open({str(REPO / 'config.yaml')!r}, encoding='utf-8')))",
            "assert samf_judge_specs(config) is not None and groups_for(config['samf'])",
            f"print(sorted(m for m in {JOB_ONLY!r} if m in sys.modules))",
        ]
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"

"""`halluflow plan estimate`: jobs, requests and GPU-hours of a config before anything runs."""

from __future__ import annotations

from .command import Command

_ESTIMATE_DESCRIPTION = (
    "Jobs, images, requests and generated tokens per stage, and estimated GPU-hours, of the workflow run that "
    "`snakemake --configfile FILE...` would start: computed from the config, before anything runs. Counts of an "
    "ODE release are upper bounds (the filter only removes images). Per-item seconds: plan.costs.<plan.gpu>. Then "
    "each priced job's runtime, host memory and CPUs, which the workflow's rules ask the cluster for."
)


_ESTIMATE_EPILOG = """examples:
  halluflow plan --configfile configs/ode-paper.yaml
  halluflow plan --configfile configs/ode-paper.yaml configs/cedi.yaml --config plan.gpu=a100-80gb
  halluflow plan --configfile configs/ode-paper.yaml --config shards.images=64 plan.costs.h100-80gb.token_s=0.002
The workflow's config.yaml (--base, default ./config.yaml) comes first, then each --configfile, merged as
Snakemake merges them (mappings key by key, lists and values replaced), then each --config KEY=VALUE (a dotted
KEY reaches into sections; VALUE is read as YAML)."""


def _configure_estimate(parser) -> None:
    parser.add_argument("--configfile", nargs="+", required=True, metavar="FILE", help="config files, in order")
    parser.add_argument("--config", nargs="+", default=[], metavar="KEY=VALUE", help="overrides after the files")
    parser.add_argument("--base", default="config.yaml", help="the workflow's base config (default: ./config.yaml)")


def _run_estimate(args) -> int:
    from halluflow.plan import (
        format_job_resources,
        format_plan,
        job_resources,
        merged_config,
        plan_rows,
        planning_warnings,
    )

    config = merged_config(args.configfile, args.config, args.base)
    rows, info = plan_rows(config)
    print(format_plan(rows, info, planning_warnings(config)))
    per_job = format_job_resources(job_resources(config))
    if per_job:
        print(per_job)
    return 0


_ESTIMATE = Command(
    "estimate",
    "jobs, images, requests, tokens and GPU-hours per stage of a config, before anything runs",
    _configure_estimate,
    _run_estimate,
    description=_ESTIMATE_DESCRIPTION,
    epilog=_ESTIMATE_EPILOG,
)

COMMANDS = (_ESTIMATE,)

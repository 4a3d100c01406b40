# The report: release-audit galleries and counts, per-model tables and figures, and the standalone HTML
# summary, all under results/<release>/report/ and flagged with report() for `snakemake --report report.html`.
# Logic lives in src/halluflow/report/; each figure of a stage that did not run is a placeholder saying so.


rule report_release_audit:
    input:
        upstream=get_report_upstream,
    output:
        gallery_accepted=report(
            f"{OUT}/report/gallery_accepted.png",
            caption="../report/gallery_accepted.rst",
            category="1. Release audit",
            labels={"figure": "accepted images"},
        ),
        gallery_rejected=report(
            f"{OUT}/report/gallery_rejected.png",
            caption="../report/gallery_rejected.rst",
            category="1. Release audit",
            labels={"figure": "rejected images"},
        ),
        counts_table=report(
            f"{OUT}/report/counts.tsv",
            caption="../report/counts.rst",
            category="1. Release audit",
            labels={"figure": "counts per distribution and pair kind"},
        ),
        rejections_table=report(
            f"{OUT}/report/rejections.tsv",
            caption="../report/rejections.rst",
            category="1. Release audit",
            labels={"figure": "rejection reasons"},
        ),
    log:
        f"{LOGS}/report_release_audit.log",
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        options=get_report_options(),
    script:
        "../scripts/rule.py"


rule report_models:
    input:
        upstream=get_report_upstream,
    output:
        scorecard_table=report(
            f"{OUT}/report/scorecard.tsv",
            caption="../report/scorecard.rst",
            category="2. Models",
            labels={"figure": "headline metrics per model"},
        ),
        metrics_table=report(
            f"{OUT}/report/metrics.tsv",
            caption="../report/metrics.rst",
            category="2. Models",
            labels={"figure": "all metrics per model"},
        ),
        radar=report(
            f"{OUT}/report/radar.png",
            caption="../report/radar.rst",
            category="2. Models",
            labels={"figure": "radar across metrics"},
        ),
        rates=report(
            f"{OUT}/report/rates_by_distribution.png",
            caption="../report/rates.rst",
            category="2. Models",
            labels={"figure": "hallucination rate by distribution"},
        ),
        rates_table=report(
            f"{OUT}/report/rates_by_distribution.tsv",
            caption="../report/rates.rst",
            category="2. Models",
            labels={"figure": "hallucination rate by distribution (table)"},
        ),
        diagnosis=report(
            f"{OUT}/report/diagnosis.png",
            caption="../report/diagnosis.rst",
            category="3. Methods",
            labels={"figure": "concept x hallucination heatmaps"},
        ),
        cedi=report(
            f"{OUT}/report/cedi_per_turn.png",
            caption="../report/cedi.rst",
            category="3. Methods",
            labels={"figure": "CEDI per-turn curves"},
        ),
        samf=report(
            f"{OUT}/report/samf_standard_vs_fuzzed.png",
            caption="../report/samf.rst",
            category="3. Methods",
            labels={"figure": "SAMF standard vs fuzzed"},
        ),
    log:
        f"{LOGS}/report_models.log",
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        options=get_report_options(),
    script:
        "../scripts/rule.py"


rule report_summary:
    input:
        upstream=get_report_upstream,
        audit=rules.report_release_audit.output,
        models=rules.report_models.output,
    output:
        summary=report(
            f"{OUT}/report/summary.html",
            caption="../report/summary.rst",
            category="0. Summary",
            labels={"figure": "standalone HTML summary"},
        ),
    log:
        f"{LOGS}/report_summary.log",
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        options=get_report_options(),
    script:
        "../scripts/rule.py"

# One page per paper in its own layout (`snakemake paper_ode`, `paper_caos`, `paper_samf`, `paper_cedi`):
# results/<release>/report/paper_<paper>.html, built by halluflow.report.papers.render_paper from "paper section"
# JSON files. The ODE, CAOS and SAMF sections are written here from the stages' results
# (halluflow.report.paper_sections); other rules add their own section files to a page's `sections` input
# (CEDI's comparison, ODE's fine-tuning). Not in `rule all`: ask for the target.


rule paper_ode:
    input:
        upstream=get_paper_upstream("score", "diagnosis"),
        validity=get_paper_validity,
        sections=get_finetune_section,  # ODE's fine-tuning section (rules/finetune.smk), [] when finetune is off
    output:
        page=f"{OUT}/report/paper_ode.html",
        folder=directory(f"{OUT}/paper/ode"),
    log:
        f"{LOGS}/paper/ode.log",
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        paper="ode",
        models=list(MODELS),
    script:
        "../scripts/rule.py"


rule paper_caos:
    input:
        upstream=get_paper_upstream("caos"),  # each caos_score reads its model's metrics
        sections=[],
    output:
        page=f"{OUT}/report/paper_caos.html",
        folder=directory(f"{OUT}/paper/caos"),
    log:
        f"{LOGS}/paper/caos.log",
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        paper="caos",
        models=method_models(config, "caos"),
    script:
        "../scripts/rule.py"


rule paper_samf:
    input:
        upstream=get_paper_upstream("samf"),
        sections=[],
    output:
        page=f"{OUT}/report/paper_samf.html",
        folder=directory(f"{OUT}/paper/samf"),
    log:
        f"{LOGS}/paper/samf.log",
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        paper="samf",
        models=method_models(config, "samf"),
    script:
        "../scripts/rule.py"


rule paper_cedi:
    input:
        sections=[rules.cedi_comparison.output.section],  # CEDI's examiners x graders section (rules/cedi.smk)
    output:
        page=f"{OUT}/report/paper_cedi.html",
        folder=directory(f"{OUT}/paper/cedi"),
    log:
        f"{LOGS}/paper/cedi.log",
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        paper="cedi",
    script:
        "../scripts/rule.py"

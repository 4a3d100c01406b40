# CEDI (seed 000): multi-turn examiner over each image's scene graph (per model), then the scene-graph grader.
# Helpers live in common.smk; logic in src/halluflow/cedi/.


rule cedi_examine:
    input:
        release=CEDI_RELEASE_MANIFEST,
        nodes=f"{OUT}/graph/nodes.parquet",
        edges=f"{OUT}/graph/edges.parquet",
        accepted=f"{OUT}/filtered/accepted.parquet",  # detector-seen objects are never asked as absent
        model=get_answer_model_input,  # stand-in / converted model folders, built by the answer stage's rules
        llm=get_cedi_llm_input,
    output:
        transcripts=f"{CEDI_DIR}/{{model}}/transcripts.parquet",
        truth=f"{CEDI_DIR}/{{model}}/truth_graphs.json",
    params:
        config=get_cedi_params(),
        model=get_cedi_model_spec,
        models_cache=MODELS_CACHE,
    wildcard_constraints:
        model=r"[^/.]+",
    log:
        f"{LOGS}/cedi_examine/{{model}}.log",
    benchmark:
        f"{BENCH}/cedi_examine/{{model}}.tsv"
    threads: 2
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
        gpu=get_answer_gpus,
    conda:
        "../envs/cedi.yaml"
    script:
        "../scripts/cedi_examine.py"


rule cedi_grade:
    input:
        transcripts=rules.cedi_examine.output.transcripts,
        truth=rules.cedi_examine.output.truth,
        nodes=f"{OUT}/graph/nodes.parquet",
        llm=get_cedi_llm_input,
    output:
        grades=f"{CEDI_DIR}/{{model}}/grades.json",
        per_turn=f"{CEDI_DIR}/{{model}}/per_turn.parquet",
        pred=f"{CEDI_DIR}/{{model}}/pred_graphs.json",
    params:
        config=get_cedi_params(),
    wildcard_constraints:
        model=r"[^/.]+",
    log:
        f"{LOGS}/cedi_grade/{{model}}.log",
    benchmark:
        f"{BENCH}/cedi_grade/{{model}}.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
    conda:
        "../envs/cedi.yaml"
    script:
        "../scripts/cedi_grade.py"

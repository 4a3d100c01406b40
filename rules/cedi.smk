# CEDI: multi-turn examiner over each image's scene graph (per model), then the scene-graph edit-distance grader.
# Logic in src/halluflow/cedi/.


rule cedi_examine:
    input:
        unpack(get_cedi_truth_input),  # cedi.source: the ODE release + concept graph, or a VG / COCO file
        weights=get_model_input,
        llm_weights=get_cedi_llm_input,
    output:
        transcripts=f"{OUT}/cedi/{{model}}/transcripts.parquet",
        truth=f"{OUT}/cedi/{{model}}/truth_graphs.json",
    log:
        f"{LOGS}/cedi_examine/{{model}}.log",
    benchmark:
        f"{BENCH}/cedi_examine/{{model}}.tsv"
    wildcard_constraints:
        model=name_pattern(method_models(config, "cedi")),
    conda:
        "../envs/cedi.yaml"
    threads: 2
    resources:
        cpus_per_task=planned_cpus("cedi_examine"),
        mem_mb=retry_mem(4000, "cedi_examine"),
        runtime=retry_runtime(60, "cedi_examine"),
        gpu=on_gpu(llms=[method_llm(config, "cedi", "question_writer", "switch", "parser")]),
    params:
        # Only what the CEDI jobs read, so editing another stage's config does not rerun them.
        **CEDI_PARAMS,
        spec=get_model_spec,
    script:
        "../scripts/rule.py"


rule cedi_grade:
    input:
        unpack(get_cedi_vocabulary_input),  # the concept graph (cedi.source ode) or nothing
        transcripts=rules.cedi_examine.output.transcripts,
        truth=rules.cedi_examine.output.truth,
        llm_weights=get_cedi_llm_input,
    output:
        grades=f"{OUT}/cedi/{{model}}/grades.json",
        per_turn=f"{OUT}/cedi/{{model}}/per_turn.parquet",
        pred=f"{OUT}/cedi/{{model}}/pred_graphs.json",
    log:
        f"{LOGS}/cedi_grade/{{model}}.log",
    benchmark:
        f"{BENCH}/cedi_grade/{{model}}.tsv"
    wildcard_constraints:
        model=name_pattern(method_models(config, "cedi")),
    conda:
        "../envs/cedi.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        **CEDI_PARAMS,
    script:
        "../scripts/rule.py"


rule cedi_comparison:
    # CEDI's comparison for the paper page (contract: rules/paper.smk's paper_cedi reads `section`): every examiner's
    # transcripts scored by every grader, the radar with the paper's normalisation, per-turn curves, premise
    # rejection and error types, from each model's grades.json.
    input:
        grades=expand(rules.cedi_grade.output.grades, model=method_models(config, "cedi")),
    output:
        section=f"{OUT}/cedi/paper/section.json",
        figures=multiext(f"{OUT}/cedi/paper/", "radar.png", "per_turn.png", "error_types.png"),
    log:
        f"{LOGS}/cedi_comparison.log",
    conda:
        "../envs/cedi.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        models=method_models(config, "cedi"),
    script:
        "../scripts/rule.py"

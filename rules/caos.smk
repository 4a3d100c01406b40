# CAOS (seed 001) on each model's generative answers, and ODE's clustered hallucination diagnosis (seed 002 §04).
# Helpers live in common.smk; logic in src/halluflow/{caos.py,extract.py,diagnosis.py}.


rule caos_score:
    input:
        answers=get_caos_answers,
        release=CAOS_RELEASE_MANIFEST,
        nodes=CAOS_NODES,
        metrics=get_caos_metrics,
        models=get_caos_model_inputs,
    output:
        summary=f"{OUT}/caos/{{model}}.json",
        objects=f"{OUT}/caos/{{model}}.objects.parquet",
        captions=f"{OUT}/caos/{{model}}.captions.parquet",
    params:
        caos=CAOS_CONFIG,
        oracle_members=get_caos_oracle_members(),
        llm=get_caos_llm(),
        models_cache=MODELS_CACHE,
    wildcard_constraints:
        model=r"[^/.]+",
    log:
        f"{LOGS}/caos_score/{{model}}.log",
    benchmark:
        f"{BENCH}/caos_score/{{model}}.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
    conda:
        "../envs/caos.yaml"
    script:
        "../scripts/caos_score.py"


rule ode_diagnosis:
    input:
        answers=get_caos_answers,
        release=CAOS_RELEASE_MANIFEST,
        captions=rules.caos_score.output.captions,
        scores=get_diagnosis_scores,
    output:
        matrix=f"{OUT}/diagnosis/{{model}}.parquet",
        heatmap=f"{OUT}/diagnosis/{{model}}.png",
        distributions=f"{OUT}/diagnosis/{{model}}.distributions.parquet",
    params:
        diagnosis=DIAGNOSIS_CONFIG,
    wildcard_constraints:
        model=r"[^/.]+",
    log:
        f"{LOGS}/ode_diagnosis/{{model}}.log",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
    conda:
        "../envs/caos.yaml"
    script:
        "../scripts/caos_diagnosis.py"

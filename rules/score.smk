# Scoring (anchors.md POPE / AMBER / CHAIR; seed 002 §4): one job per model under test, after all its answer shards.
# Helpers (get_score_answers, SCORING) live in common.smk; logic in src/halluflow/metrics/ode.py.


rule score:
    input:
        answers=get_score_answers,
        queries=f"{OUT}/queries/queries.parquet",
        nodes=f"{OUT}/graph/nodes.parquet",
    output:
        scores=f"{OUT}/scores/{{model}}/answers.parquet",
        metrics=f"{OUT}/metrics/{{model}}.json",
    params:
        scoring=SCORING,
    log:
        f"{LOGS}/score/{{model}}.log",
    benchmark:
        f"{BENCH}/score/{{model}}.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=lambda wildcards, attempt: 10 * attempt,
    conda:
        "../envs/score.yaml"
    script:
        "../scripts/score.py"

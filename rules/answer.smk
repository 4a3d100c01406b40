# Answer stage: every model under test answers the queries of the configured source (this config's ODE release, or
# POPE / AMBER files), one job per model per shard (the model loads once per shard), resumable through the
# request-hash cache under cache/<model>/. Logic in src/halluflow/{answer,sources,cache,models}.py.


rule answer:
    input:
        source=get_answer_source_input,
        model=get_model_input,
    output:
        answers=f"{OUT}/answers/{{model}}/{{shard}}.parquet",
    log:
        f"{LOGS}/answer/{{model}}/{{shard}}.log",
    benchmark:
        f"{BENCH}/answer/{{model}}/{{shard}}.tsv"
    wildcard_constraints:
        model=name_pattern(MODELS),
    conda:
        "../envs/answer.yaml"
    # One torch thread per job: on a shared CPU, more spin-wait against the other jobs (see answer.limit_cpu_threads).
    threads: 1
    resources:
        mem_mb=retry_mem(4000),
        runtime=lambda wildcards, attempt: 60 * attempt,
        gpu=on_gpu(),
    params:
        answer=get_answer_params,
    script:
        "../scripts/answer.py"

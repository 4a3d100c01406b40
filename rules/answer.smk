# Answer stage: every model under test answers the queries of the configured source (this config's ODE release, or
# POPE / AMBER files), one job per model per shard (the model loads once per shard), resumable through the
# request-hash cache under cache/<model>/. Logic in src/halluflow/{answer,sources,cache,models}.py.


rule answer:
    input:
        source=get_answer_source_input,
        weights=get_model_input,
        # the concept graph, for a model that reads it (halluflow.models.resolve: reads_graph)
        graph=get_model_graph_input,
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
        cpus_per_task=planned_cpus("answer"),
        mem_mb=retry_mem(4000, "answer"),
        runtime=retry_runtime(60, "answer"),
        gpu=on_gpu(),
    params:
        # only what the job reads, so editing another model's entry does not rerun this one
        spec=get_model_spec,
        answer=config["answer"],
        shards=len(ANSWER_SHARDS),
        # the request-hash cache of the model: a rerun repeats no finished request
        cache=get_answer_cache,
    script:
        "../scripts/rule.py"

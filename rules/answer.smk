# Answer stage (design: answers/{model}/{shard}): every model under test answers the release queries, one job per
# model per shard (the model loads once per shard), resumable through the request-hash cache under cache/<model>/.
# Helpers live in common.smk; logic in src/halluflow/{answer,sources,cache}.py and src/halluflow/backends/.


rule build_standin_vlm:
    output:
        model=directory(f"{MODELS_CACHE}/{{vlm}}"),
    params:
        build=get_standin_vlm_spec,
    wildcard_constraints:
        vlm=STANDIN_VLM_PATTERN,
    log:
        "logs/models/build_standin_vlm_{vlm}.log",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
    conda:
        "../envs/answer.yaml"
    script:
        "../scripts/build_standin_vlm.py"


rule build_local_llm:
    output:
        model=directory(LOCAL_LLM),
    log:
        "logs/models/build_local_llm.log",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
    conda:
        "../envs/answer.yaml"
    script:
        "../scripts/build_local_llm.py"


rule answer:
    input:
        source=get_answer_source_input,
        model=get_answer_model_input,
        graph=get_answer_graph_input,
    output:
        answers=f"{OUT}/answers/{{model}}/{{shard}}.parquet",
    params:
        answer=get_answer_params,
    wildcard_constraints:
        model=ANSWER_MODEL_PATTERN,
    log:
        f"{LOGS}/answer/{{model}}/{{shard}}.log",
    benchmark:
        f"{BENCH}/answer/{{model}}/{{shard}}.tsv"
    # One torch thread per job: on a shared CPU, more spin-wait against the other jobs (see answer.limit_cpu_threads).
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
        gpu=get_answer_gpus,
        api_calls=get_answer_api_calls,
    conda:
        "../envs/answer.yaml"
    script:
        "../scripts/answer.py"

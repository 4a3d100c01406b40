# UniHall + SAMF (seed 003): UniHall instances from the release, standard evaluation, one controller-training job per
# (model, subtype x question-type group) so a cluster trains groups in parallel, fuzzed evaluation with the
# CentralFuzzController (+ the random-policy "dynamic" setting of Table 11), and the standard / dynamic / fuzzed
# table. Helpers live in common.smk; logic in src/halluflow/samf/.


rule samf_instances:
    input:
        source=get_samf_source_input,
    output:
        instances=f"{SAMF_DIR}/instances.json",
        split=f"{SAMF_DIR}/split.parquet",
    params:
        samf=SAMF_CONFIG,
        release_dir=SAMF_RELEASE,
        release=RELEASE,
        seed=config["seed"],
    log:
        f"{LOGS}/samf_instances.log",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 1000 * attempt,
    conda:
        "../envs/samf.yaml"
    script:
        "../scripts/samf_instances.py"


rule samf_standard_eval:
    input:
        instances=rules.samf_instances.output.instances,
        split=rules.samf_instances.output.split,
        model=get_samf_model_input,
    output:
        table=f"{SAMF_DIR}/{{model}}/standard.parquet",
    params:
        samf=SAMF_CONFIG,
        model=get_samf_model_spec,
        release_dir=SAMF_RELEASE,
        models_cache=MODELS_CACHE,
        graph_dir=SAMF_GRAPH_DIR,
        llm=get_samf_llm(),
    wildcard_constraints:
        model=r"[^/.]+",
    log:
        f"{LOGS}/samf_standard_eval/{{model}}.log",
    benchmark:
        f"{BENCH}/samf_standard_eval/{{model}}.tsv"
    threads: 2
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 30 * attempt,
        gpu=get_answer_gpus,
        api_calls=get_answer_api_calls,
    conda:
        "../envs/samf.yaml"
    script:
        "../scripts/samf_standard_eval.py"


rule samf_train:
    input:
        instances=rules.samf_instances.output.instances,
        split=rules.samf_instances.output.split,
        model=get_samf_model_input,
    output:
        policy=f"{SAMF_DIR}/{{model}}/train/{{group}}.json",
    params:
        samf=SAMF_CONFIG,
        model=get_samf_model_spec,
        release_dir=SAMF_RELEASE,
        models_cache=MODELS_CACHE,
        graph_dir=SAMF_GRAPH_DIR,
        llm=get_samf_llm(),
        seed=config["seed"],
    wildcard_constraints:
        model=r"[^/.]+",
        group=r"[a-z_]+_(YON|VQA)",
    log:
        f"{LOGS}/samf_train/{{model}}/{{group}}.log",
    benchmark:
        f"{BENCH}/samf_train/{{model}}/{{group}}.tsv"
    threads: 2
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
        gpu=get_answer_gpus,
        api_calls=get_answer_api_calls,
    conda:
        "../envs/samf.yaml"
    script:
        "../scripts/samf_train.py"


rule samf_fuzzed_eval:
    input:
        instances=rules.samf_instances.output.instances,
        split=rules.samf_instances.output.split,
        trained=get_samf_trained,
        model=get_samf_model_input,
    output:
        policies=f"{SAMF_DIR}/{{model}}/policies.json",
        table=f"{SAMF_DIR}/{{model}}/fuzzed.parquet",
        instances=f"{SAMF_DIR}/{{model}}/fuzzed_instances.json",
        dynamic=f"{SAMF_DIR}/{{model}}/dynamic.parquet",
        images=directory(f"{SAMF_DIR}/{{model}}/fuzzed"),
    params:
        samf=SAMF_CONFIG,
        model=get_samf_model_spec,
        release_dir=SAMF_RELEASE,
        models_cache=MODELS_CACHE,
        graph_dir=SAMF_GRAPH_DIR,
        llm=get_samf_llm(),
        seed=config["seed"],
    wildcard_constraints:
        model=r"[^/.]+",
    log:
        f"{LOGS}/samf_fuzzed_eval/{{model}}.log",
    benchmark:
        f"{BENCH}/samf_fuzzed_eval/{{model}}.tsv"
    threads: 2
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 30 * attempt,
        gpu=get_answer_gpus,
        api_calls=get_answer_api_calls,
    conda:
        "../envs/samf.yaml"
    script:
        "../scripts/samf_fuzzed_eval.py"


rule samf_compare:
    input:
        standard=rules.samf_standard_eval.output.table,
        fuzzed=rules.samf_fuzzed_eval.output.table,
        dynamic=rules.samf_fuzzed_eval.output.dynamic,
    output:
        table=f"{SAMF_DIR}/{{model}}/comparison.parquet",
        summary=f"{SAMF_DIR}/{{model}}/comparison.json",
    wildcard_constraints:
        model=r"[^/.]+",
    log:
        f"{LOGS}/samf_compare/{{model}}.log",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 1000 * attempt,
    conda:
        "../envs/samf.yaml"
    script:
        "../scripts/samf_compare.py"

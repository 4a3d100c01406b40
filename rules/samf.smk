# UniHall + SAMF (self-adaptive mutation fuzzing of hallucination benchmarks): UniHall instances from the release,
# standard evaluation, one controller-training job per (model, controller of samf.controllers, subtype x
# question-type group) so a cluster trains groups and controllers in parallel on the same instances, fuzzed
# evaluation with each controller's CentralFuzzController, the random-policy "dynamic" setting of Table 11 (once per
# model), and the comparison: standard / dynamic / fuzzed (first controller) plus controller x category x
# static/fuzzed (every controller) and Table 4's metric-human agreement when samf.agreement.labels is set. Logic in
# src/halluflow/samf/.


checkpoint samf_instances:
    input:
        unpack(get_samf_source_input),  # the ODE release (manifest) or the UniHall file
    output:
        instances=f"{OUT}/fuzz/instances.json",
        split=f"{OUT}/fuzz/split.parquet",
    log:
        f"{LOGS}/samf_instances.log",
    conda:
        "../envs/samf.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(1000),
    params:
        samf=config["samf"],
        release_name=RELEASE,
        seed=config["seed"],
    script:
        "../scripts/rule.py"


rule samf_standard_eval:
    input:
        unpack(get_samf_job_input),
    output:
        table=f"{OUT}/fuzz/{{model}}/standard.parquet",
    log:
        f"{LOGS}/samf_standard_eval/{{model}}.log",
    benchmark:
        f"{BENCH}/samf_standard_eval/{{model}}.tsv"
    wildcard_constraints:
        model=name_pattern(method_models(config, "samf")),
    conda:
        "../envs/samf.yaml"
    threads: 2
    resources:
        **SAMF_JOB_RESOURCES,
        cpus_per_task=planned_cpus("samf_standard_eval"),
        mem_mb=retry_mem(4000, "samf_standard_eval"),
        runtime=retry_runtime(30, "samf_standard_eval"),
    params:
        **SAMF_JOB_PARAMS,
    script:
        "../scripts/rule.py"


rule samf_train:
    input:
        unpack(get_samf_job_input),
    output:
        policy=f"{OUT}/fuzz/{{model}}/{{controller}}/train/{{group}}.json",
    log:
        f"{LOGS}/samf_train/{{model}}/{{controller}}/{{group}}.log",
    benchmark:
        f"{BENCH}/samf_train/{{model}}/{{controller}}/{{group}}.tsv"
    wildcard_constraints:
        model=name_pattern(method_models(config, "samf")),
        controller=SAMF_CONTROLLER_PATTERN,
        group=r"[a-z_]+_(YON|VQA)",
    conda:
        "../envs/samf.yaml"
    threads: 2
    resources:
        **SAMF_JOB_RESOURCES,
        cpus_per_task=planned_cpus("samf_train"),
        mem_mb=retry_mem(4000, "samf_train"),
        runtime=retry_runtime(60, "samf_train"),
    params:
        **SAMF_JOB_PARAMS,
    script:
        "../scripts/rule.py"


rule samf_fuzzed_eval:
    input:
        unpack(get_samf_job_input),
        trained=get_samf_trained,
    output:
        policies=f"{OUT}/fuzz/{{model}}/{{controller}}/policies.json",
        table=f"{OUT}/fuzz/{{model}}/{{controller}}/fuzzed.parquet",
        fuzzed_instances=f"{OUT}/fuzz/{{model}}/{{controller}}/fuzzed_instances.json",
        images=directory(f"{OUT}/fuzz/{{model}}/{{controller}}/fuzzed"),
    log:
        f"{LOGS}/samf_fuzzed_eval/{{model}}/{{controller}}.log",
    benchmark:
        f"{BENCH}/samf_fuzzed_eval/{{model}}/{{controller}}.tsv"
    wildcard_constraints:
        model=name_pattern(method_models(config, "samf")),
        controller=SAMF_CONTROLLER_PATTERN,
    conda:
        "../envs/samf.yaml"
    threads: 2
    resources:
        **SAMF_JOB_RESOURCES,
        cpus_per_task=planned_cpus("samf_fuzzed_eval"),
        mem_mb=retry_mem(4000, "samf_fuzzed_eval"),
        runtime=retry_runtime(30, "samf_fuzzed_eval"),
    params:
        **SAMF_JOB_PARAMS,
    script:
        "../scripts/rule.py"


rule samf_dynamic_eval:
    input:
        unpack(get_samf_job_input),
    output:
        table=f"{OUT}/fuzz/{{model}}/dynamic.parquet",
        images=directory(f"{OUT}/fuzz/{{model}}/dynamic"),
    log:
        f"{LOGS}/samf_dynamic_eval/{{model}}.log",
    benchmark:
        f"{BENCH}/samf_dynamic_eval/{{model}}.tsv"
    wildcard_constraints:
        model=name_pattern(method_models(config, "samf")),
    conda:
        "../envs/samf.yaml"
    threads: 2
    resources:
        **SAMF_JOB_RESOURCES,
        cpus_per_task=planned_cpus("samf_dynamic_eval"),
        mem_mb=retry_mem(4000, "samf_dynamic_eval"),
        runtime=retry_runtime(30, "samf_dynamic_eval"),
    params:
        **SAMF_JOB_PARAMS,
    script:
        "../scripts/rule.py"


rule samf_compare:
    input:
        standard=rules.samf_standard_eval.output.table,
        fuzzed=get_samf_fuzzed,
        dynamic=rules.samf_dynamic_eval.output.table,
        labels=get_samf_agreement_input,
    output:
        table=f"{OUT}/fuzz/{{model}}/comparison.parquet",
        summary=f"{OUT}/fuzz/{{model}}/comparison.json",
        controllers=f"{OUT}/fuzz/{{model}}/controllers.parquet",
    log:
        f"{LOGS}/samf_compare/{{model}}.log",
    wildcard_constraints:
        model=name_pattern(method_models(config, "samf")),
    conda:
        "../envs/samf.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(1000),
    params:
        controller_names=samf_controllers(config["samf"]),
        agreement=samf_agreement_params(config),
    script:
        "../scripts/rule.py"

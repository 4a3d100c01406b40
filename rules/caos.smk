# CAOS (context-aware object similarities of hallucinated objects) on each model's generative answers (of the ODE
# release, or captions of a coco source's images), and ODE's clustered concept x hallucination diagnosis. Logic in src/halluflow/caos/ and src/halluflow/ode/diagnosis.py.


rule caos_score:
    input:
        unpack(get_caos_truth_input),  # the ODE release (manifest) + graph nodes, or a coco source's annotations
        answers=get_model_answers,
        metrics=[rules.score.output.metrics],  # POPE-F1 / CHAIR shown beside CAOS (a list: the job reads many)
        models=get_caos_model_inputs,
    output:
        summary=f"{OUT}/caos/{{model}}.json",
        objects=f"{OUT}/caos/{{model}}.objects.parquet",
        captions=f"{OUT}/caos/{{model}}.captions.parquet",
    log:
        f"{LOGS}/caos_score/{{model}}.log",
    benchmark:
        f"{BENCH}/caos_score/{{model}}.tsv"
    wildcard_constraints:
        model=name_pattern(method_models(config, "caos")),
    conda:
        "../envs/caos.yaml"
    threads: 1
    resources:
        cpus_per_task=planned_cpus("caos_score"),
        mem_mb=retry_mem(3000, "caos_score"),
        runtime=retry_runtime(60, "caos_score"),
        gpu=on_gpu(oracle_members(config), [method_llm(config, "caos", "extractor")], own=False),
    params:
        caos=config["caos"],
        source=SOURCE if BENCHMARK.caption_truth else None,  # coco: its queries and truth
        oracle_members=oracle_members(config),
        # Only when the extractor uses the default `llm:`, so editing `llm:` does not rerun CAOS otherwise.
        llm=config["llm"] if method_llm(config, "caos", "extractor") is config["llm"] else None,
        # the request cache: the oracle members share the answer stage's folders, a rerun asks nothing again
        cache=REQUEST_CACHE,
    script:
        "../scripts/rule.py"


rule ode_diagnosis:
    input:
        answers=get_model_answers,
        release=rules.package_release.output.manifest,
        captions=rules.caos_score.output.captions,
        scores=[rules.score.output.scores],
    output:
        matrix=f"{OUT}/diagnosis/{{model}}.parquet",
        heatmap=f"{OUT}/diagnosis/{{model}}.png",
        distributions=f"{OUT}/diagnosis/{{model}}.distributions.parquet",
    log:
        f"{LOGS}/ode_diagnosis/{{model}}.log",
    wildcard_constraints:
        model=name_pattern(method_models(config, "diagnosis")),
    conda:
        "../envs/caos.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        diagnosis=config["diagnosis"],
    script:
        "../scripts/rule.py"

# ODE data pipeline, second half: detector filter -> queries -> the versioned release (manifest written last).
# Logic in src/halluflow/ode/{filtering,queries,release}.py.


rule filter_images:
    input:
        images=get_round_images,
        detections=get_round_detections,
        plans=get_round_plans,
        scenes=rules.sample_scenes.output.scenes,
    output:
        accepted=f"{OUT}/filtered/accepted.parquet",
        rejected=f"{OUT}/filtered/rejected.parquet",
    log:
        f"{LOGS}/filter_images.log",
    benchmark:
        f"{BENCH}/filter_images.tsv"
    conda:
        "../envs/ode-data.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        filter=config["ode"]["filter"],
        seed=config["seed"],
    script:
        "../scripts/rule.py"


rule make_queries:
    input:
        accepted=rules.filter_images.output.accepted,
        scenes=rules.sample_scenes.output.scenes,
        nodes=rules.build_graph.output.nodes,
        edges=rules.build_graph.output.edges,
        hallu=rules.build_graph.output.hallu,
        images=get_round_images,
        plans=get_round_plans,
        # question templates per noun kind, attribute words, synonyms never asked as absent
        nouns=QUESTION_RESOURCES["nouns"],
        attribute_words=QUESTION_RESOURCES["attribute_words"],
        synonyms=QUESTION_RESOURCES["synonyms"],
        # "no" only about things the prompt does not imply; attributes that fit their object
        concepts=QUESTION_RESOURCES["concepts"],
        attribute_types=QUESTION_RESOURCES["attribute_types"],
        spelling=rules.build_graph.output.spelling,
    output:
        queries=f"{OUT}/queries/queries.parquet",
        meaning=f"{OUT}/queries/meaning.json",  # what each meaning rule removed (the DATACARD's table)
    log:
        f"{LOGS}/make_queries.log",
    conda:
        "../envs/ode-data.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        settings=config["ode"]["queries"],
        seed=config["seed"],
        release=RELEASE,  # with the seed, the release identity in every query id
        # the "no" candidates declared to the detector at make_prompts: the same list is drawn again here
        spare=config["ode"]["prompts"]["detect_candidates"],
    script:
        "../scripts/rule.py"


rule package_release:
    input:
        accepted=rules.filter_images.output.accepted,
        rejected=rules.filter_images.output.rejected,
        queries=rules.make_queries.output.queries,
        meaning=rules.make_queries.output.meaning,
        scenes=rules.sample_scenes.output.scenes,
        images=get_round_images,
        detections=get_round_detections,
        plans=get_round_plans,
        graph_sources=graph_source_files(config),
        parent_manifest=PARENT_MANIFEST,
        nodes=rules.build_graph.output.nodes,  # the DATACARD's Standard drift from the graph's top band
        edges=rules.build_graph.output.edges,
        resources=list(QUESTION_RESOURCES.values()),  # their sha256 go into the manifest and the DATACARD
    output:
        # The manifest, not directory(): Snakemake would drop a .snakemake_timestamp into a directory output,
        # an unlisted file that `halluflow release verify` must reject. The folder is replaced as a whole, once the
        # new one is complete; update(): Snakemake keeps (and on failure restores) the old manifest meanwhile.
        manifest=update(f"{OUT}/release/manifest.json"),
    log:
        f"{LOGS}/package_release.log",
    benchmark:
        f"{BENCH}/package_release.tsv"
    conda:
        "../envs/ode-data.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        # Only the sections that shape the release: another stage's settings must not rerun or alter it.
        config={k: config[k] for k in ("release", "seed", "shards", "ode", "synthesis", "detection") if k in config},
        seed=config["seed"],
        name=RELEASE,
        parent=config["ode"]["lineage"]["parent"],
    script:
        "../scripts/rule.py"


# The label audit (src/halluflow/ode/audit.py): a second detector and the CAOS VLM oracle re-judge every yes/no item
# and a stratified sample becomes one annotation page, beside the release (never inside it). Not in `rule all`: ask for
# results/<release>/audit/audit.json. Recording human labels (`halluflow release audit REL --labels CSV`) needs a
# person, so it is a command, not a rule.
rule release_audit:
    input:
        release=rules.package_release.output.manifest,
        models=get_audit_model_inputs,
    output:
        summary=f"{OUT}/audit/audit.json",
        verdicts=f"{OUT}/audit/verifiers.parquet",
        sample=f"{OUT}/audit/sample.parquet",
        page=f"{OUT}/audit/annotate.html",
    log:
        f"{LOGS}/release_audit.log",
    benchmark:
        f"{BENCH}/release_audit.tsv"
    conda:
        "../envs/detect.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(4000),
        gpu=on_gpu(audit_oracle_specs(config, config["audit"]["oracle"]), own=False),
    params:
        # The sections the audit reads: its own, the oracle's models and vote, the yes/no suffix.
        config={k: config[k] for k in ("audit", "models", "caos", "answer") if k in config},
    script:
        "../scripts/rule.py"

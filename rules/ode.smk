# ODE data pipeline (seed 002): concept graph -> scenes -> prompts; (synthesize, detect in models.smk);
# filter -> queries -> release. Helpers live in common.smk; logic in src/halluflow/{graph.py,ode/,release.py}.


rule build_graph:
    input:
        sources=get_graph_source_files,
    output:
        nodes=f"{OUT}/graph/nodes.parquet",
        edges=f"{OUT}/graph/edges.parquet",
        graphml=f"{OUT}/graph/graph.graphml",
        hallu=f"{OUT}/graph/hallu_edges.parquet",
    params:
        graph=ODE_CONFIG["graph"],
    log:
        f"{LOGS}/build_graph.log",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
    conda:
        "../envs/ode-data.yaml"
    script:
        "../scripts/ode_build_graph.py"


rule sample_scenes:
    input:
        nodes=rules.build_graph.output.nodes,
        edges=rules.build_graph.output.edges,
    output:
        scenes=f"{OUT}/scenes/scenes.parquet",
    params:
        sampling=ODE_CONFIG["sampling"],
        seed=config["seed"],
    log:
        f"{LOGS}/sample_scenes.log",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
    conda:
        "../envs/ode-data.yaml"
    script:
        "../scripts/ode_sample_scenes.py"


rule make_prompts:
    input:
        scenes=rules.sample_scenes.output.scenes,
        nodes=rules.build_graph.output.nodes,
        edges=rules.build_graph.output.edges,
    output:
        prompts=ODE_PROMPTS,
    params:
        prompts=ODE_CONFIG["prompts"],
        shards=len(IMAGE_SHARDS),
        seed=config["seed"],
    log:
        f"{LOGS}/make_prompts.log",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
    conda:
        "../envs/ode-data.yaml"
    script:
        "../scripts/ode_make_prompts.py"


rule filter_images:
    input:
        images=expand(f"{OUT}/images/{{shard}}.parquet", shard=IMAGE_SHARDS),
        detections=expand(f"{OUT}/detections/{{shard}}.parquet", shard=IMAGE_SHARDS),
        scenes=rules.sample_scenes.output.scenes,
    output:
        accepted=f"{OUT}/filtered/accepted.parquet",
        rejected=f"{OUT}/filtered/rejected.parquet",
    params:
        filter=ODE_CONFIG["filter"],
        seed=config["seed"],
    log:
        f"{LOGS}/filter_images.log",
    benchmark:
        f"{BENCH}/filter_images.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
    conda:
        "../envs/ode-data.yaml"
    script:
        "../scripts/ode_filter_images.py"


rule make_queries:
    input:
        accepted=rules.filter_images.output.accepted,
        scenes=rules.sample_scenes.output.scenes,
        nodes=rules.build_graph.output.nodes,
        edges=rules.build_graph.output.edges,
        hallu=rules.build_graph.output.hallu,
    output:
        queries=ODE_QUERIES,
    params:
        queries=ODE_CONFIG["queries"],
        seed=config["seed"],
    log:
        f"{LOGS}/make_queries.log",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
    conda:
        "../envs/ode-data.yaml"
    script:
        "../scripts/ode_make_queries.py"


rule package_release:
    input:
        accepted=rules.filter_images.output.accepted,
        rejected=rules.filter_images.output.rejected,
        queries=rules.make_queries.output.queries,
        scenes=rules.sample_scenes.output.scenes,
        images=expand(f"{OUT}/images/{{shard}}.parquet", shard=IMAGE_SHARDS),
        detections=expand(f"{OUT}/detections/{{shard}}.parquet", shard=IMAGE_SHARDS),
    output:
        # The manifest, not directory(): Snakemake would drop a .snakemake_timestamp into a directory output,
        # an unlisted file that `halluflow release verify` must reject. The folder is replaced as a whole.
        manifest=ODE_RELEASE_MANIFEST,
    params:
        # Only the sections that shape the release: another stage's settings must not rerun or alter it.
        config={k: config[k] for k in ("release", "seed", "shards", "ode", "synthesis", "detection") if k in config},
        seed=config["seed"],
        name=RELEASE,
    log:
        f"{LOGS}/package_release.log",
    benchmark:
        f"{BENCH}/package_release.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
    conda:
        "../envs/ode-data.yaml"
    script:
        "../scripts/ode_package_release.py"

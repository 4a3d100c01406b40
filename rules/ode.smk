# ODE data pipeline (seed 002): concept graph -> scenes -> prompts; (synthesize, detect in models.smk);
# filter -> queries -> release. Helpers live in common.smk; logic in src/halluflow/{graph.py,ode/,release.py}.


rule build_graph:
    input:
        sources=get_graph_source_files,
    output:
        nodes=f"{OUT}/graph/nodes.parquet",
        edges=f"{OUT}/graph/edges.parquet",
        graphml=f"{OUT}/graph/graph.graphml",
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

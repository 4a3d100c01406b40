# ODE data pipeline, first half (Tu et al., "ODE: Open-Set Evaluation of Hallucinations in Multimodal Large Language
# Models", CVPR 2025): concept graph -> scenes -> prompts. Then images.smk (synthesize, detect) and release.smk.
# Logic in src/halluflow/ode/.


rule build_graph:
    input:
        sources=get_graph_sources,
        spelling_table=QUESTION_RESOURCES["spelling"],  # misspelt graph words corrected or dropped
    output:
        nodes=f"{OUT}/graph/nodes.parquet",
        edges=f"{OUT}/graph/edges.parquet",
        graphml=f"{OUT}/graph/graph.graphml",
        hallu=f"{OUT}/graph/hallu_edges.parquet",
        spelling=f"{OUT}/graph/spelling.json",  # the words the spelling table corrected or dropped
    log:
        f"{LOGS}/build_graph.log",
    conda:
        "../envs/ode-data.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        graph=config["ode"]["graph"],
    script:
        "../scripts/rule.py"


rule sample_scenes:
    input:
        nodes=rules.build_graph.output.nodes,
        edges=rules.build_graph.output.edges,
        parent=PARENT_MANIFEST,
        # virtual nodes and non-nouns are never drawn; attribute words are cleaned per kind
        nouns=QUESTION_RESOURCES["nouns"],
        attribute_words=QUESTION_RESOURCES["attribute_words"],
        # abstract concepts are never drawn; an attribute must fit its object's class
        concepts=QUESTION_RESOURCES["concepts"],
        attribute_types=QUESTION_RESOURCES["attribute_types"],
        # a domain release's category table (ode.domain.categories)
        categories=[QUESTION_RESOURCES[k] for k in ("domain_categories",) if k in QUESTION_RESOURCES],
    output:
        scenes=f"{OUT}/scenes/scenes.parquet",
    log:
        f"{LOGS}/sample_scenes.log",
    conda:
        "../envs/ode-data.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        sampling=config["ode"]["sampling"],
        seed=config["seed"],
        domain=config["ode"]["domain"],
        lineage=config["ode"]["lineage"],
    script:
        "../scripts/rule.py"


rule make_prompts:
    input:
        scenes=rules.sample_scenes.output.scenes,
        nodes=rules.build_graph.output.nodes,
        edges=rules.build_graph.output.edges,
        hallu=rules.build_graph.output.hallu,
        # articles of the prompt's objects; the "no" candidates skip synonyms of the image's objects, concepts that
        # are no things and what the prompt implies
        nouns=QUESTION_RESOURCES["nouns"],
        synonyms=QUESTION_RESOURCES["synonyms"],
        concepts=QUESTION_RESOURCES["concepts"],
    output:
        prompts=f"{OUT}/prompts/prompts.parquet",
    log:
        f"{LOGS}/make_prompts.log",
    conda:
        "../envs/ode-data.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        settings=config["ode"]["prompts"],
        # the "no" candidates of every image are decided here and given to the detector (its vocabulary)
        queries=config["ode"]["queries"],
        shards=len(IMAGE_SHARDS),
        seed=config["seed"],
    script:
        "../scripts/rule.py"

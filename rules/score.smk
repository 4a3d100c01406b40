# Scoring, one job per model after all its answer shards. ODE source: POPE-style metrics with ODE's breakdowns and
# CHAIR-like generative scores (src/halluflow/ode/scoring.py). Static sources (POPE, RePOPE, AMBER, COCO; one
# module each in src/halluflow/benchmarks): the answers are written in the benchmark's own answer format and scored
# by the same code as `halluflow score pope|amber|chair`.

if BENCHMARK.release:

    rule score:
        input:
            answers=get_model_answers,
            release=get_answer_source_input,  # the release's manifest: the task it declares
            # an existing release (answer.source.path) brings its own questions
            queries=f"{SOURCE['path']}/queries.parquet" if SOURCE["path"] else rules.make_queries.output.queries,
            nodes=rules.build_graph.output.nodes,
            # Cog's hallucination-prone objects: G_H (scoring.cog_graph: hallucination) or the co-occurrence graph
            hallu=rules.build_graph.output.hallu,
            edges=rules.build_graph.output.edges,
            synonyms=QUESTION_RESOURCES["synonyms"],  # CHAIR's table: a caption's mentions of the truth objects
        output:
            scores=f"{OUT}/scores/{{model}}/answers.parquet",
            metrics=f"{OUT}/metrics/{{model}}.json",
        log:
            f"{LOGS}/score/{{model}}.log",
        benchmark:
            f"{BENCH}/score/{{model}}.tsv"
        conda:
            "../envs/score.yaml"
        threads: 1
        resources:
            mem_mb=retry_mem(2000),
            runtime=retry_runtime(10),
        params:
            source=SOURCE,
            scoring=config["scoring"],
        script:
            "../scripts/rule.py"

    rule score_compare:
        input:
            scores=get_all_scores,
        output:
            comparison=f"{OUT}/compare/models.json",
        log:
            f"{LOGS}/score/comparison.log",
        conda:
            "../envs/score.yaml"
        threads: 1
        resources:
            mem_mb=retry_mem(2000),
            runtime=retry_runtime(10),
        params:
            bootstrap=config["scoring"]["bootstrap"],
        script:
            "../scripts/rule.py"

    # Validity against real images (src/halluflow/validity.py): this run's scores beside those of a second run
    # of the same models on a static real-image set (validity.results). Not in `rule all`: ask for
    # results/<release>/validity/validity.json.
    if config["validity"]["source"]:

        rule release_validity:
            input:
                scores=get_all_scores,
                metrics=get_all_metrics,
                release=get_answer_source_input,
                labels=config["validity"]["source"]["path"],
                real=(
                    [f"{config['validity']['results']}/metrics/{m}.json" for m in MODELS]
                    if config["validity"]["results"]
                    else []
                ),
            output:
                validity=f"{OUT}/validity/validity.json",
            log:
                f"{LOGS}/release_validity.log",
            conda:
                "../envs/score.yaml"
            threads: 1
            resources:
                mem_mb=retry_mem(2000),
            params:
                settings=config["validity"],
                seed=config["seed"],
            script:
                "../scripts/rule.py"

else:

    rule score:
        input:
            answers=get_model_answers,
            # the benchmark's question (and annotation) files; the job reads them through the source param
            source_files=get_answer_source_input,
        output:
            # POPE: JSONL {question_id, answer}; AMBER: JSON array [{id, response}]; COCO: JSONL {image_id, caption}
            # (what their scorers read)
            scores=f"{OUT}/scores/{{model}}/answers.{BENCHMARK.answer_suffix}",
            metrics=f"{OUT}/metrics/{{model}}.json",
        log:
            f"{LOGS}/score/{{model}}.log",
        conda:
            "../envs/score.yaml"
        threads: 1
        resources:
            mem_mb=retry_mem(2000),
            runtime=retry_runtime(10),
        params:
            source=SOURCE,
            scoring=config["scoring"],
        script:
            "../scripts/rule.py"

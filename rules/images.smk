# Model stages of ODE (Tu et al., "ODE: Open-Set Evaluation of Hallucinations in Multimodal Large Language Models",
# CVPR 2025, section 3.2): synthesize images, detect the scene objects in them. GPU rules, one job per static image
# shard (the model loads once per shard). Logic in src/halluflow/ode/{synthesis,detection}.py.


rule synthesize:
    input:
        prompts=rules.make_prompts.output.prompts,
        model=lambda wildcards: stage_model_inputs(config["synthesis"]),
    output:
        # The PNGs of the shard (images/<shard>/*.png) are written beside the table and reused on a restart when
        # their recorded sha256 still matches (images/<shard>.resume.jsonl); the table appears last.
        table=f"{OUT}/images/{{shard}}.parquet",
    log:
        f"{LOGS}/synthesize/{{shard}}.log",
    benchmark:
        f"{BENCH}/synthesize/{{shard}}.tsv"
    conda:
        "../envs/models.yaml"
    threads: 2
    resources:
        mem_mb=lambda wildcards, attempt: 8000 * attempt,
        runtime=lambda wildcards, attempt: 120 * attempt,
        gpu=1,
    params:
        synthesis=config["synthesis"],
        model=stage_model(config["synthesis"]),
    script:
        "../scripts/synthesize.py"


rule detect:
    input:
        images=rules.synthesize.output.table,
        prompts=rules.make_prompts.output.prompts,
        scenes=rules.sample_scenes.output.scenes,
        model=lambda wildcards: stage_model_inputs(config["detection"]),
    output:
        table=f"{OUT}/detections/{{shard}}.parquet",
    log:
        f"{LOGS}/detect/{{shard}}.log",
    benchmark:
        f"{BENCH}/detect/{{shard}}.tsv"
    conda:
        "../envs/detect.yaml"
    threads: 2
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
        gpu=1,
    params:
        detection=config["detection"],
        model=stage_model(config["detection"]),
    script:
        "../scripts/detect.py"

# Model stages of ODE (Tu et al., "ODE: Open-Set Evaluation of Hallucinations in Multimodal Large Language Models",
# CVPR 2025, section 3.2): synthesize images, detect the scene objects in them. GPU rules, one job per static image
# shard (the model loads once per shard). Logic in src/halluflow/ode/{synthesis,detection}.py.


rule synthesize:
    input:
        prompts=rules.make_prompts.output.prompts,
        weights=get_generator_weights,
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
        mem_mb=retry_mem(8000),
        runtime=retry_runtime(120, "synthesize"),
        gpu=1,
    params:
        synthesis=get_synthesis_params,
        model=get_generator_model,
    script:
        "../scripts/rule.py"


rule detect:
    input:
        images=rules.synthesize.output.table,
        prompts=rules.make_prompts.output.prompts,
        scenes=rules.sample_scenes.output.scenes,
        weights=get_detector_weights,
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
        mem_mb=retry_mem(4000),
        runtime=retry_runtime(60, "detect"),
        gpu=1,
    params:
        detection=config["detection"],
        model=stage_model(config["detection"]),
    script:
        "../scripts/rule.py"


# Regeneration rounds (synthesis.max_attempts > 1), each planned from the previous round's rejects over all shards:
# checkpoint retry_prompts writes round n's prompts (new seeds, the missed objects stressed), each row with the
# round job that regenerates it. Jobs "<shard>-a<n>" (GPU) exist only for planned rows, packed up to one
# first-round shard's size per job, so a round costs jobs in proportion to its rejects: none when there are none.
checkpoint retry_prompts:
    input:
        unpack(previous_round),
        prompts=rules.make_prompts.output.prompts,
        scenes=rules.sample_scenes.output.scenes,
    output:
        plan=f"{OUT}/prompts/retry/a{{attempt}}.parquet",
    log:
        f"{LOGS}/retry_prompts/a{{attempt}}.log",
    benchmark:
        f"{BENCH}/retry_prompts/a{{attempt}}.tsv"
    wildcard_constraints:
        attempt=r"[1-9]\d*",
    conda:
        "../envs/ode-data.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        keep_threshold=config["ode"]["filter"]["keep_threshold"],
        seed=config["seed"],
        generators=get_generator_names,
    script:
        "../scripts/rule.py"


use rule synthesize as synthesize_retry with:
    input:
        prompts=rules.retry_prompts.output.plan,
        weights=get_generator_weights,
    output:
        table=f"{OUT}/images/{{shard}}-a{{attempt}}.parquet",
    log:
        f"{LOGS}/synthesize/{{shard}}-a{{attempt}}.log",
    benchmark:
        f"{BENCH}/synthesize/{{shard}}-a{{attempt}}.tsv"
    wildcard_constraints:
        attempt=r"[1-9]\d*",


use rule detect as detect_retry with:
    input:
        images=rules.synthesize_retry.output.table,
        prompts=rules.retry_prompts.output.plan,
        scenes=rules.sample_scenes.output.scenes,
        weights=get_detector_weights,
    output:
        table=f"{OUT}/detections/{{shard}}-a{{attempt}}.parquet",
    log:
        f"{LOGS}/detect/{{shard}}-a{{attempt}}.log",
    benchmark:
        f"{BENCH}/detect/{{shard}}-a{{attempt}}.tsv"
    wildcard_constraints:
        attempt=r"[1-9]\d*",

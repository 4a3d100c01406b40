# Model stages of ODE (seed 002 §3.2): synthesize images, detect the scene objects in them. GPU rules, one job per
# static image shard (the model loads once per shard). Stand-in models are built offline by the two build rules.
# Helpers live in common.smk; logic in src/halluflow/{synthesis,detection,standins}.py.


rule build_standin_synthesizer:
    output:
        model=directory(standin_dir(SYNTHESIS)),
    params:
        stand_in=SYNTHESIS["stand_in"],
    log:
        f"logs/models/build_standin_{SYNTHESIS['stand_in']['name']}.log",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
    conda:
        "../envs/models.yaml"
    script:
        "../scripts/build_standin.py"


rule build_standin_detector:
    output:
        model=directory(standin_dir(DETECTION)),
    params:
        stand_in=DETECTION["stand_in"],
    log:
        f"logs/models/build_standin_{DETECTION['stand_in']['name']}.log",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
    conda:
        "../envs/models.yaml"
    script:
        "../scripts/build_standin.py"


rule synthesize:
    input:
        prompts=f"{OUT}/prompts/prompts.parquet",
        model=get_synthesis_model_input,
    output:
        # The PNGs of the shard (images/<shard>/*.png) are written beside the table and reused on a restart when
        # their recorded sha256 still matches (images/<shard>.resume.jsonl); the table appears last.
        table=f"{OUT}/images/{{shard}}.parquet",
    params:
        synthesis=SYNTHESIS,
        model=model_of(SYNTHESIS),
    log:
        f"{LOGS}/synthesize/{{shard}}.log",
    benchmark:
        f"{BENCH}/synthesize/{{shard}}.tsv"
    threads: 2
    resources:
        mem_mb=lambda wildcards, attempt: 8000 * attempt,
        runtime=lambda wildcards, attempt: 120 * attempt,
        gpu=1,
    conda:
        "../envs/models.yaml"
    script:
        "../scripts/synthesize.py"


rule detect:
    input:
        images=rules.synthesize.output.table,
        prompts=f"{OUT}/prompts/prompts.parquet",
        scenes=f"{OUT}/scenes/scenes.parquet",
        model=get_detection_model_input,
    output:
        table=f"{OUT}/detections/{{shard}}.parquet",
    params:
        detection=DETECTION,
        model=model_of(DETECTION),
    log:
        f"{LOGS}/detect/{{shard}}.log",
    benchmark:
        f"{BENCH}/detect/{{shard}}.tsv"
    threads: 2
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
        gpu=1,
    conda:
        "../envs/detect.yaml"
    script:
        "../scripts/detect.py"

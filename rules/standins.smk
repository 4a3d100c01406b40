# Model folders built offline before any job loads them: tiny random stand-ins (synthesizer, detector, VLMs with
# a `build:` block) and the packaged SmolLM2 converted into a Hugging Face folder. halluflow.models.resolve names
# the rule that builds each folder; logic in src/halluflow/models/standins.py and src/halluflow/backends/.


rule build_standin_synthesizer:
    output:
        model=directory(f"{MODELS_CACHE}/{{synthesizer}}"),
    log:
        "logs/models/build_standin_{synthesizer}.log",
    wildcard_constraints:
        synthesizer=name_pattern(standin_synthesizers()),
    conda:
        "../envs/models.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        stand_in=get_standin_synthesizer,
    script:
        "../scripts/rule.py"


rule build_standin_detector:
    output:
        model=directory(f"{MODELS_CACHE}/{config['detection']['stand_in']['name']}"),
    log:
        f"logs/models/build_standin_{config['detection']['stand_in']['name']}.log",
    conda:
        "../envs/models.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        stand_in=config["detection"]["stand_in"],
    script:
        "../scripts/rule.py"


rule build_standin_vlm:
    output:
        model=directory(f"{MODELS_CACHE}/{{vlm}}"),
    log:
        "logs/models/build_standin_vlm_{vlm}.log",
    wildcard_constraints:
        vlm=name_pattern(standin_vlms()),
    conda:
        "../envs/answer.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(2000),
    params:
        build=get_standin_vlm_build,
    script:
        "../scripts/rule.py"


rule build_local_llm:
    output:
        model=directory(LOCAL_LLM),
    log:
        "logs/models/build_local_llm.log",
    conda:
        "../envs/answer.yaml"
    threads: 1
    resources:
        mem_mb=retry_mem(3000),
    script:
        "../scripts/rule.py"

# ODE's fine-tuning loop (Tu et al., ODE, Fig. 10/11): one model under test is fine-tuned with TRL on the exports of
# a training release (SFT and DPO), then this run's release, a child sharing no concept pair with it, is answered and
# scored by the base model (rules answer + score) and by each tuned model (ode_finetune_eval); ode_finetune writes
# the before/after paper section. Planned only when finetune.enabled. Logic in src/halluflow/ode/finetune.py.

if config["finetune"]["enabled"]:
    try:
        check_finetune_config(config)
    except ConfigError as _exc:
        raise SystemExit(f"halluflow: invalid config: {_exc}")
    FT_MODEL = finetune_model(config)["name"]
    FT_DIR = f"{OUT}/finetune/{FT_MODEL}"
    FT_METHODS = list(config["finetune"]["methods"])
    FT_GPU = int(resolved(FT_MODEL).gpu)
    # What both the training and the evaluation job read: the base model's entry, how the answer stage answers and
    # the scorer scores, and the request cache root (the base model's folder is the answer stage's).
    FT_PARAMS = {
        "spec": MODELS[FT_MODEL],
        "answer": config["answer"],
        "scoring": config["scoring"],
        "cache": REQUEST_CACHE,
    }

    rule ode_finetune_train:
        input:
            train=f"{train_release_dir(config)}/manifest.json",
            release=get_answer_source_input,  # checked disjoint from the training release before any step
            weights=model_inputs(FT_MODEL),
            nodes=rules.build_graph.output.nodes,  # DPO scores the base model's answers on the training release
            hallu=rules.build_graph.output.hallu,
            edges=rules.build_graph.output.edges,
        output:
            model=directory(f"{FT_DIR}/{{method}}/model"),
            record=f"{FT_DIR}/{{method}}/train.json",
            # the export trained on (with DPO: the base model's answers on the training release, scored)
            data=directory(f"{FT_DIR}/{{method}}/data"),
        log:
            f"{LOGS}/finetune/{{method}}/train.log",
        benchmark:
            f"{BENCH}/finetune/{{method}}/train.tsv"
        wildcard_constraints:
            method="sft|dpo",
        conda:
            "../envs/finetune.yaml"
        threads: 1
        resources:
            mem_mb=retry_mem(8000),
            runtime=retry_runtime(240),
            gpu=FT_GPU,
        params:
            **FT_PARAMS,
            base=finetune_base(FT_MODEL),
            finetune=config["finetune"],
            seed=config["seed"],
        script:
            "../scripts/rule.py"

    rule ode_finetune_eval:
        input:
            model=rules.ode_finetune_train.output.model,
            record=rules.ode_finetune_train.output.record,
            release=get_answer_source_input,
            nodes=rules.build_graph.output.nodes,
            hallu=rules.build_graph.output.hallu,
            edges=rules.build_graph.output.edges,
        output:
            answers=f"{FT_DIR}/{{method}}/answers.parquet",
            scores=f"{FT_DIR}/{{method}}/scores.parquet",
            metrics=f"{FT_DIR}/{{method}}/metrics.json",
        log:
            f"{LOGS}/finetune/{{method}}/eval.log",
        wildcard_constraints:
            method="sft|dpo",
        conda:
            "../envs/finetune.yaml"
        threads: 1
        resources:
            mem_mb=retry_mem(4000),
            runtime=retry_runtime(120),
            gpu=FT_GPU,
        params:
            **FT_PARAMS,
        script:
            "../scripts/rule.py"

    rule ode_finetune:
        input:
            base=expand(rules.score.output.metrics, model=FT_MODEL)[0],
            tuned=expand(rules.ode_finetune_eval.output.metrics, method=FT_METHODS),
            records=expand(rules.ode_finetune_train.output.record, method=FT_METHODS),
        output:
            section=f"{OUT}/finetune/section.json",
            figure=f"{OUT}/finetune/before_after.png",
        log:
            f"{LOGS}/finetune/section.log",
        conda:
            "../envs/report.yaml"
        threads: 1
        resources:
            mem_mb=retry_mem(2000),
        params:
            methods=FT_METHODS,
            model=FT_MODEL,
            dpi=config["report"]["dpi"],
        script:
            "../scripts/rule.py"

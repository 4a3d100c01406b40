# Final files of every planned stage (halluflow.plan.stage_plan decides which run and logs why the others do
# not); `rule all` asks for get_final_output(). Included after every stage file, so all rules exist here.


def stage_targets():
    """Final files of every planned stage (rule all = all of them)."""
    models = list(MODELS)
    targets = {
        "ode": [rules.package_release.output.manifest, *expand(rules.detect.output.table, shard=IMAGE_SHARDS)],
        "answer": expand(rules.answer.output.answers, model=models, shard=ANSWER_SHARDS),
        "score": expand(list(rules.score.output), model=models)
        + ([rules.score_compare.output.comparison] if BENCHMARK.release else []),
        "caos": expand(rules.caos_score.output.summary, model=method_models(config, "caos")),
        "diagnosis": expand(list(rules.ode_diagnosis.output)[:2], model=method_models(config, "diagnosis")),
        "cedi": expand(rules.cedi_grade.output.grades, model=method_models(config, "cedi")),
        "samf": expand(list(rules.samf_compare.output), model=method_models(config, "samf"))
        + expand(
            rules.samf_fuzzed_eval.output.policies,
            model=method_models(config, "samf"),
            controller=samf_controllers(config["samf"]),
        ),
        "report": [rules.report_summary.output.summary],
    }
    return {stage: files for stage, files in targets.items() if STAGES[stage] is None}


def get_final_output():
    return [t for targets in stage_targets().values() for t in targets]

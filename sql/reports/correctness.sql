-- Was each item of the latest run of each (method, dataset, split) right? One row per run x question.
-- "Right" is read from the per-item scores the run stored, by method family (found from the run's metrics):
--   linking (ELA): scores['accuracy'] = 1 (exact match of the linked entity set);
--   search (search-recall): scores['recall@50'] = 1 (every gold mention's entity is in its top 50);
--   QA: scores['em'] = 1 (exact match);
--   open-world KGQA (anchorrag, tog, cot; any method on a kgqa-open dataset): scores['hit1_tog'] = 1;
--   KGQA over Wikidata (QALD family): scores['qald_macro_f1_mean'] = 1 (the question's answer set exactly right);
--   entity alignment: scores['hits@1'] = 1.
-- correct is NULL when the item was not scored (e.g. a question without a gold mention or gold answer).
-- error_slices and question_comparison build on this view: report views are created in file-name order.
WITH run_family AS (
    SELECT
        run_id,
        CASE
            WHEN bool_or(metric = 'accuracy') THEN 'linking'
            WHEN bool_or(metric = 'recall@50') THEN 'search'
            WHEN bool_or(metric = 'hit1_tog') THEN 'tog'
            WHEN bool_or(metric = 'qald_macro_f1_mean') THEN 'qald'
            WHEN bool_or(metric = 'hits@1') THEN 'alignment'
            WHEN bool_or(metric = 'em') THEN 'qa'
        END AS family
    FROM latest_metrics
    GROUP BY run_id
),

scored AS (
    SELECT
        p.run_id,
        p.method,
        p.dataset,
        p.split,
        p.question_id,
        f.family,
        CASE f.family
            WHEN 'linking' THEN 'accuracy'
            WHEN 'search' THEN 'recall@50'
            WHEN 'tog' THEN 'hit1_tog'
            WHEN 'qald' THEN 'qald_macro_f1_mean'
            WHEN 'alignment' THEN 'hits@1'
            WHEN 'qa' THEN 'em'
        END AS score_name,
        p.scores,
        p.error,
        p.llm_calls,
        p.prompt_tokens,
        p.completion_tokens,
        p.latency_s
    FROM latest_predictions AS p
    LEFT JOIN run_family AS f ON p.run_id = f.run_id
)

SELECT
    run_id,
    method,
    dataset,
    split,
    question_id,
    family,
    score_name,
    scores[score_name] AS score,
    scores[score_name] = 1 AS correct,
    error,
    llm_calls,
    prompt_tokens,
    completion_tokens,
    latency_s
FROM scored

-- Check (0 rows = pass): ratio metrics (P/R/accuracy, recall@k, EM/F1, Hit@k, MRR, nDCG, QALD F1, coverage)
-- lie in [0, 1], and counts, tokens, times and sizes are not negative; in the metrics table and in the
-- per-item scores of predictions.
WITH summary AS (
    SELECT run_id, metric, value, 'metrics' AS source, NULL AS question_id FROM metrics
),

per_item AS (
    SELECT
        run_id,
        unnest(map_keys(scores)) AS metric,
        unnest(map_values(scores)) AS value,
        'predictions.scores' AS source,
        question_id
    FROM predictions
),

all_values AS (
    SELECT * FROM summary
    UNION ALL BY NAME
    SELECT * FROM per_item
),

classified AS (
    SELECT
        *,
        CASE
            WHEN metric IN (
                'precision', 'recall', 'accuracy', 'micro_precision', 'micro_recall', 'micro_f1',
                'em', 'f1', 'hit1', 'acc_sub', 'hit1_tog', 'acc_tog', 'mrr', 'mrr_retrieval', 'strategyqa_acc',
                'kb_coverage', 'gold_in_kb'
            )
            OR metric LIKE 'qald\_%' ESCAPE '\'
            OR regexp_matches(metric, '^(recall|ndcg|topk_acc|hits|candidate_recall)@[0-9]+(_covered)?$')
                THEN 'ratio'
            WHEN metric IN (
                'wall_s', 'llm_calls', 'prompt_tokens', 'completion_tokens', 'tokens_per_item', 'peak_rss_mb',
                'error_count', 'llm_seconds', 'non_llm_seconds', 'index_disk_mb', 'invalid_count'
            )
                THEN 'non_negative'
        END AS kind
    FROM all_values
)

SELECT
    run_id,
    source,
    question_id,
    metric,
    kind,
    value
FROM classified
WHERE (kind = 'ratio' AND (value < 0 OR value > 1 OR isnan(value)))
    OR (kind = 'non_negative' AND (value < 0 OR isnan(value)))
ORDER BY run_id, metric, question_id

-- Check (0 rows = pass): every stored summary metric of a run can be recomputed from the run's predictions.
--   * per-item metrics (precision, recall, accuracy, recall@k, em, f1, ...): value = mean of the per-item
--     scores in predictions.scores (invalid_count: their sum), within 1e-9, and n = number of predictions
--     with that score; pooled metrics (micro_*, qald_macro_f1_gerbil) are checked on n only;
--   * search runs: recall@k_covered = mean recall@k over items with scores['gold_in_kb'] = 1, kb_coverage =
--     share of items with scores['gold_in_kb'] = 1;
--   * efficiency: llm_calls, prompt_tokens, completion_tokens, tokens_per_item, error_count from the rows;
--     prefix_cache_share = prefix-cached / prompt tokens over the LLM steps of the trajectories the engine
--     answered (not replayed from the response cache, no error, the count present).
--   * flags summed over items: fallback_count = sum(scores['fallback']), missing_articles = sum of
--     scores['missing_articles'], parse_failures = sum of scores['parse_failures'] (n = all predictions of the
--     run); flags are never averaged as per-item metrics.
--   * upper bounds: oracle_<headline> = share of the run's failure-stage rows at or past its family's first stage
--     after retrieval (tasks.metrics.stages.ORACLE_FROM), n = its stage rows.
-- Measured-only rows (wall_s, peak_rss_mb, llm_seconds, non_llm_seconds, retrieval_s, index_disk_mb) are not
-- checked.
-- A stored metric that nothing here can recompute is reported (teach this check about it).
WITH item_scores AS (
    SELECT
        run_id,
        scores['gold_in_kb'] AS gold_in_kb,
        unnest(map_keys(scores)) AS metric,
        unnest(map_values(scores)) AS score
    FROM predictions
),

from_item_scores AS (
    SELECT
        run_id,
        metric,
        CASE WHEN metric = 'invalid_count' THEN sum(score) ELSE avg(score) END AS value,
        count(*) AS n,
        metric LIKE 'micro\_%' ESCAPE '\' OR metric = 'qald_macro_f1_gerbil' AS n_only
    FROM item_scores
    WHERE metric NOT IN ('fallback', 'missing_articles', 'parse_failures')
    GROUP BY run_id, metric
),

from_flag_sums AS (
    SELECT
        run_id,
        CASE metric WHEN 'fallback' THEN 'fallback_count' ELSE metric END AS metric,
        sum(score) AS value,
        count(*) AS n,
        false AS n_only
    FROM item_scores
    WHERE metric IN ('fallback', 'missing_articles', 'parse_failures')
    GROUP BY run_id, metric
),

from_covered_items AS (
    SELECT
        run_id,
        metric || '_covered' AS metric,
        avg(score) AS value,
        count(*) AS n,
        false AS n_only
    FROM item_scores
    WHERE gold_in_kb = 1 AND regexp_matches(metric, '^recall@[0-9]+$')
    GROUP BY run_id, metric
),

run_rows AS (
    SELECT
        run_id,
        count(*) AS n,
        count(*) FILTER (WHERE scores['gold_in_kb'] = 1) / count(*) AS kb_coverage,
        coalesce(sum(llm_calls), 0)::DOUBLE AS llm_calls,
        coalesce(sum(prompt_tokens), 0)::DOUBLE AS prompt_tokens,
        coalesce(sum(completion_tokens), 0)::DOUBLE AS completion_tokens,
        (coalesce(sum(prompt_tokens), 0) + coalesce(sum(completion_tokens), 0)) / count(*) AS tokens_per_item,
        count(*) FILTER (WHERE error IS NOT NULL AND error <> '')::DOUBLE AS error_count
    FROM predictions
    GROUP BY run_id
),

from_rows AS (
    SELECT run_id, metric, value, n, false AS n_only
    FROM run_rows
    UNPIVOT (
        value FOR metric IN (kb_coverage, llm_calls, prompt_tokens, completion_tokens, tokens_per_item, error_count)
    )
),

llm_steps AS (
    SELECT p.run_id, s.step
    FROM predictions AS p, unnest(from_json(coalesce(p.trajectory, '[]'), '["JSON"]')) AS s(step)
),

from_trajectories AS (
    SELECT
        l.run_id,
        'prefix_cache_share' AS metric,
        sum((l.step ->> 'prefix_cached_tokens')::DOUBLE) / sum((l.step ->> 'prompt_tokens')::DOUBLE) AS value,
        any_value(r.n) AS n,
        false AS n_only
    FROM llm_steps AS l
    INNER JOIN run_rows AS r ON l.run_id = r.run_id
    WHERE (l.step ->> 'kind') = 'llm'  -- parenthesised: DuckDB 1.5 binds IS / = tighter than ->>
        AND NOT coalesce((l.step ->> 'cached')::BOOLEAN, false)
        AND (l.step ->> 'prefix_cached_tokens') IS NOT NULL
        AND (l.step ->> 'error') IS NULL
    GROUP BY l.run_id
),

oracle_from (family, stage_rank) AS (
    -- tasks.metrics.stages.ORACLE_FROM as ranks in STAGES
    VALUES ('linking', 2), ('textqa', 1), ('alignment', 1), ('kgqa', 2)
),

from_stages AS (
    SELECT
        s.run_id,
        m.metric,
        avg((s.stage_rank >= o.stage_rank)::DOUBLE) AS value,
        count(*) AS n,
        false AS n_only
    FROM stages AS s
    INNER JOIN oracle_from AS o ON s.family = o.family
    INNER JOIN (SELECT DISTINCT run_id, metric FROM metrics WHERE metric LIKE 'oracle\_%' ESCAPE '\') AS m
        ON s.run_id = m.run_id
    GROUP BY s.run_id, m.metric
),

recomputed AS (
    SELECT * FROM from_stages
    UNION ALL
    SELECT * FROM from_item_scores
    UNION ALL
    SELECT * FROM from_flag_sums
    UNION ALL
    SELECT * FROM from_covered_items
    UNION ALL
    SELECT * FROM from_rows
    UNION ALL
    SELECT * FROM from_trajectories
)

SELECT
    m.run_id,
    m.metric,
    m.value AS stored_value,
    r.value AS recomputed_value,
    m.n AS stored_n,
    coalesce(r.n, 0) AS recomputed_n
FROM metrics AS m
LEFT JOIN recomputed AS r ON m.run_id = r.run_id AND m.metric = r.metric
WHERE m.metric NOT IN ('wall_s', 'peak_rss_mb', 'llm_seconds', 'non_llm_seconds', 'retrieval_s', 'index_disk_mb')
    AND (
        m.n IS DISTINCT FROM coalesce(r.n, 0)
        OR (
            NOT coalesce(r.n_only, false)
            AND NOT coalesce(abs(m.value - r.value) <= 1e-9, m.value IS NULL AND r.value IS NULL)
        )
    )
ORDER BY m.run_id, m.metric

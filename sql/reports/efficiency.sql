-- What did each latest run cost? One row per latest run of each (method, dataset, split): wall time, LLM calls
-- and tokens, time in and outside the LLM, peak memory, index size on disk, per-item errors and throughput
-- (questions per second of run wall time). Values are the run's efficiency rows in the metrics table.
SELECT
    r.method,
    r.dataset,
    r.split,
    r.n_questions,
    max(m.value) FILTER (WHERE m.metric = 'wall_s') AS wall_s,
    r.n_questions / nullif(max(m.value) FILTER (WHERE m.metric = 'wall_s'), 0) AS questions_per_s,
    (max(m.value) FILTER (WHERE m.metric = 'llm_calls'))::BIGINT AS llm_calls,
    (max(m.value) FILTER (WHERE m.metric = 'prompt_tokens'))::BIGINT AS prompt_tokens,
    (max(m.value) FILTER (WHERE m.metric = 'completion_tokens'))::BIGINT AS completion_tokens,
    max(m.value) FILTER (WHERE m.metric = 'tokens_per_item') AS tokens_per_item,
    max(m.value) FILTER (WHERE m.metric = 'llm_seconds') AS llm_seconds,
    max(m.value) FILTER (WHERE m.metric = 'non_llm_seconds') AS non_llm_seconds,
    max(m.value) FILTER (WHERE m.metric = 'retrieval_s') AS retrieval_s,
    max(m.value) FILTER (WHERE m.metric = 'peak_rss_mb') AS peak_rss_mb,
    max(m.value) FILTER (WHERE m.metric = 'index_disk_mb') AS index_disk_mb,
    (max(m.value) FILTER (WHERE m.metric = 'error_count'))::BIGINT AS error_count,
    r.n_shards,
    r.backend,
    r.model,
    r.kb_version,
    r.run_id
FROM latest_runs AS r
LEFT JOIN latest_metrics AS m ON r.run_id = m.run_id
GROUP BY
    r.run_id, r.method, r.dataset, r.split, r.n_questions, r.n_shards, r.backend, r.model, r.kb_version
ORDER BY r.dataset, r.split, r.method

-- The papers' figures beside linkedqa's: the newest stored row of each (paper, condition, metric, model).
SELECT
    paper,
    condition,
    paper_table,
    paper_row,
    paper_model,
    paper_metric,
    metric,
    paper_printed,
    paper_value,
    measured,
    difference,
    n,
    model,
    question_limit,
    run_id,
    kb_version,
    git_sha,
    recorded_at
FROM reproductions
QUALIFY row_number() OVER (PARTITION BY paper, condition, metric, model ORDER BY recorded_at DESC, run_id DESC) = 1
ORDER BY paper, condition, metric, model

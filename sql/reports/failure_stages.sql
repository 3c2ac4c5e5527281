-- Where each item failed: one row per run and question, from the runs' stored failure stages
-- (tasks/metrics/stages.py states the rules; docs/metrics.md#failure-stages), with the stage's position in its
-- family's list (0 = the earliest failure), the evidence that decided it (JSON) and the question's text.
SELECT
    s.run_id,
    s.method,
    s.dataset,
    s.split,
    s.question_id,
    q.question,
    s.family,
    s.stage,
    s.stage_rank,
    s.evidence
FROM stages AS s
LEFT JOIN latest_questions AS q
    ON s.dataset = q.dataset AND s.split = q.split AND s.question_id = q.question_id

-- Check (0 rows = pass): every prediction answers a question stored in some version of its dataset
-- (same dataset, split and question_id).
SELECT
    p.run_id,
    p.dataset,
    p.split,
    p.question_id
FROM predictions AS p
ANTI JOIN questions AS q
    ON p.dataset = q.dataset AND p.split = q.split AND p.question_id = q.question_id
ORDER BY p.run_id, p.question_id

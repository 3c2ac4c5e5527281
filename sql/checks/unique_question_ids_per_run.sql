-- Check (0 rows = pass): a question id appears at most once in the predictions of a run.
SELECT
    run_id,
    dataset,
    split,
    question_id,
    count(*) AS n_rows
FROM predictions
GROUP BY run_id, dataset, split, question_id
HAVING count(*) > 1
ORDER BY run_id, question_id

-- Check (0 rows = pass): each finished run's row in `runs` agrees with its predictions: n_questions = number of
-- prediction rows, n_errors = rows with a (non-empty) error; and no predictions belong to a run without a row.
WITH counted AS (
    SELECT
        run_id,
        count(*) AS n_predictions,
        count(*) FILTER (WHERE error IS NOT NULL AND error <> '') AS n_prediction_errors
    FROM predictions
    GROUP BY run_id
)

SELECT
    coalesce(r.run_id, c.run_id) AS run_id,
    r.n_questions,
    c.n_predictions,
    r.n_errors,
    c.n_prediction_errors
FROM runs AS r
FULL OUTER JOIN counted AS c ON r.run_id = c.run_id
WHERE r.run_id IS NULL
    OR r.n_questions IS DISTINCT FROM coalesce(c.n_predictions, 0)
    OR r.n_errors IS DISTINCT FROM coalesce(c.n_prediction_errors, 0)
ORDER BY run_id

-- Every method's failure stage on the same question, from the latest run of each (method, dataset, split): one row
-- per question, with the stage of each method ("method: stage", sorted by method) and whether they disagree.
SELECT
    s.dataset,
    s.split,
    s.question_id,
    string_agg(s.method || ': ' || s.stage, '; ' ORDER BY s.method) AS stages,
    count(*) AS methods,
    count(DISTINCT s.stage) > 1 AS methods_disagree
FROM stages AS s
INNER JOIN latest_runs AS r USING (run_id)
GROUP BY s.dataset, s.split, s.question_id
ORDER BY s.dataset, s.split, s.question_id

-- Which method got which question right? Long format: one row per question (dataset x split x question_id)
-- and method, from the latest run of each method ("right" per family: see correctness.sql), with the
-- question text and, over all methods that ran on the question, how many scored it and got it right.
-- question_comparison_wide has one row per question.
WITH question_text AS (
    -- the question's text from the newest stored version of its dataset that has it
    SELECT
        q.dataset,
        q.split,
        q.question_id,
        q.question
    FROM questions AS q
    LEFT JOIN (SELECT DISTINCT dataset, dataset_version FROM latest_questions) AS l
        ON q.dataset = l.dataset AND q.dataset_version = l.dataset_version
    QUALIFY row_number() OVER (
        PARTITION BY q.dataset, q.split, q.question_id
        ORDER BY l.dataset IS NULL, q.dataset_version DESC
    ) = 1
)

SELECT
    c.dataset,
    c.split,
    c.question_id,
    t.question,
    c.method,
    c.correct,
    c.score,
    c.score_name,
    c.error,
    count(c.correct) OVER per_question AS n_methods_scored,
    count(*) FILTER (WHERE c.correct) OVER per_question AS n_methods_right,
    c.run_id
FROM correctness AS c
LEFT JOIN question_text AS t
    ON c.dataset = t.dataset AND c.split = t.split AND c.question_id = t.question_id
WINDOW per_question AS (PARTITION BY c.dataset, c.split, c.question_id)
ORDER BY c.dataset, c.split, c.question_id, c.method

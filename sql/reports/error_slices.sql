-- Where do methods fail? Per latest run (see correctness.sql for "right"), one row per slice:
--   all              every item;
--   question_length  words in the question: 1-5, 6-10, 11+;
--   popularity       sitelinks of the first gold entity in the latest KB: 0-10, 11-50, 51+, unknown (no gold
--                    entity, entity not in the KB, or a KB source without sitelinks);
--   relation         meta.relation (EntityQuestions) or meta.property (simplequestions-wd) of the question,
--                    only for datasets whose questions have one.
-- accuracy = right / scored items; error_rate = 1 - accuracy; failure_rate = items with a recorded pipeline
-- error / items; mean_score = mean of the family's score (accuracy, recall@50 or em).
WITH question_info AS (
    -- one row per question, from the newest stored version of its dataset that has it
    SELECT
        q.dataset,
        q.split,
        q.question_id,
        len(regexp_split_to_array(trim(q.question), '\s+')) AS n_words,
        q.gold_entities[1] AS first_gold_entity,
        coalesce(
            json_extract_string(q.meta, '$.relation'),
            json_extract_string(q.meta, '$.property')
        ) AS relation
    FROM questions AS q
    LEFT JOIN (SELECT DISTINCT dataset, dataset_version FROM latest_questions) AS l
        ON q.dataset = l.dataset AND q.dataset_version = l.dataset_version
    QUALIFY row_number() OVER (
        PARTITION BY q.dataset, q.split, q.question_id
        ORDER BY l.dataset IS NULL, q.dataset_version DESC
    ) = 1
),

items AS (
    SELECT
        c.run_id,
        c.method,
        c.dataset,
        c.split,
        c.correct,
        c.score,
        c.error,
        CASE
            WHEN i.n_words <= 5 THEN '1-5'
            WHEN i.n_words <= 10 THEN '6-10'
            WHEN i.n_words > 10 THEN '11+'
        END AS length_bucket,
        CASE
            WHEN e.sitelinks IS NULL THEN 'unknown'
            WHEN e.sitelinks <= 10 THEN '0-10'
            WHEN e.sitelinks <= 50 THEN '11-50'
            ELSE '51+'
        END AS popularity_bucket,
        i.relation
    FROM correctness AS c
    LEFT JOIN question_info AS i
        ON c.dataset = i.dataset AND c.split = i.split AND c.question_id = i.question_id
    LEFT JOIN latest_entities AS e ON i.first_gold_entity = e.qid
),

sliced AS (
    SELECT *, 'all' AS slice_kind, 'all' AS slice FROM items
    UNION ALL
    SELECT *, 'question_length' AS slice_kind, length_bucket AS slice FROM items WHERE length_bucket IS NOT NULL
    UNION ALL
    SELECT *, 'popularity' AS slice_kind, popularity_bucket AS slice FROM items
    UNION ALL
    SELECT *, 'relation' AS slice_kind, relation AS slice FROM items WHERE relation IS NOT NULL
)

SELECT
    method,
    dataset,
    split,
    slice_kind,
    slice,
    count(*) AS n_items,
    count(correct) AS n_scored,
    count(*) FILTER (WHERE correct) AS n_right,
    count(*) FILTER (WHERE correct) / nullif(count(correct), 0) AS accuracy,
    1 - count(*) FILTER (WHERE correct) / nullif(count(correct), 0) AS error_rate,
    count(*) FILTER (WHERE error IS NOT NULL AND error <> '') / count(*) AS failure_rate,
    avg(score) AS mean_score,
    run_id
FROM sliced
GROUP BY run_id, method, dataset, split, slice_kind, slice
ORDER BY
    dataset,
    split,
    method,
    list_position(['all', 'question_length', 'popularity', 'relation'], slice_kind),
    list_position(['1-5', '6-10', '11+', '0-10', '11-50', '51+', 'unknown'], slice),
    slice

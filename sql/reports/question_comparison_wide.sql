-- Which methods got a question right? Wide format: one row per question (dataset x split x question_id) over
-- the latest run of each method (see question_comparison), with the methods that got it right / wrong, a
-- method -> correct map, and one column per method named in docs/architecture.md#cli-contract (NULL: no latest run on this question
-- or not scored). Example: SELECT * FROM question_comparison_wide WHERE ela AND NOT "search-recall".
SELECT
    dataset,
    split,
    question_id,
    any_value(question) AS question,
    count(*) AS n_methods,
    count(correct) AS n_methods_scored,
    count(*) FILTER (WHERE correct) AS n_methods_right,
    coalesce(list(method ORDER BY method) FILTER (WHERE correct), []) AS methods_right,
    coalesce(list(method ORDER BY method) FILTER (WHERE NOT correct), []) AS methods_wrong,
    map(list(method ORDER BY method), list(correct ORDER BY method)) AS correct_by_method,
    bool_or(correct) FILTER (WHERE method = 'ela') AS ela,
    bool_or(correct) FILTER (WHERE method = 'search-recall') AS "search-recall",
    bool_or(correct) FILTER (WHERE method = 'er') AS er,
    bool_or(correct) FILTER (WHERE method = 'closed-book') AS "closed-book",
    bool_or(correct) FILTER (WHERE method = 'bm25-rag') AS "bm25-rag",
    bool_or(correct) FILTER (WHERE method = 'dense-rag') AS "dense-rag",
    bool_or(correct) FILTER (WHERE method = 'react-kg') AS "react-kg",
    bool_or(correct) FILTER (WHERE method = 'kg-1hop') AS "kg-1hop",
    bool_or(correct) FILTER (WHERE method = 'anchorrag') AS anchorrag,
    bool_or(correct) FILTER (WHERE method = 'tog') AS tog,
    bool_or(correct) FILTER (WHERE method = 'cot') AS cot
FROM question_comparison
GROUP BY dataset, split, question_id
ORDER BY dataset, split, question_id

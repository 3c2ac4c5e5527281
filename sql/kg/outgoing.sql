-- Truthy claims whose subject is in $qids (VARCHAR[]), at most $lim per subject (NULL: all), kept in
-- tasks.kg.base.fact_sort_key order. Reads view kg_by_subject (sorted by subject: the IN filter prunes).
SELECT
    subject,
    property,
    object_qid,
    object_value,
    datatype
FROM kg_by_subject
WHERE subject IN (SELECT unnest($qids))
QUALIFY $lim IS NULL OR row_number() OVER (
    PARTITION BY subject
    ORDER BY
        CAST(substr(property, 2) AS BIGINT),
        object_qid IS NULL,
        CAST(substr(object_qid, 2) AS BIGINT),
        object_value
) <= $lim

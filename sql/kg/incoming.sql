-- Truthy item-valued claims whose object is in $qids (VARCHAR[]), at most $lim per object (NULL: all), kept
-- in tasks.kg.base.fact_sort_key order. Reads view kg_by_object (sorted by object: the IN filter prunes).
SELECT
    subject,
    property,
    object_qid,
    object_value,
    datatype
FROM kg_by_object
WHERE object_qid IN (SELECT unnest($qids))
QUALIFY $lim IS NULL OR row_number() OVER (
    PARTITION BY object_qid
    ORDER BY
        CAST(substr(subject, 2) AS BIGINT),
        CAST(substr(property, 2) AS BIGINT)
) <= $lim

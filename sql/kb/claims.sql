-- Distinct claims (subject, property, object); datatype/rank/source from the richest source (ties: by value).
SELECT
    subject,
    property,
    object_qid,
    object_value,
    arg_min(datatype, (prio, datatype)) AS datatype,
    arg_min("rank", (prio, "rank")) AS "rank",
    arg_min(source, (prio, source)) AS source
FROM stg_claims
GROUP BY subject, property, object_qid, object_value

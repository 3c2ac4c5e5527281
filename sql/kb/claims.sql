-- Distinct claims (subject, property, object); datatype/rank/source from the richest source.
SELECT
    subject,
    property,
    object_qid,
    object_value,
    arg_min(datatype, prio) AS datatype,
    arg_min("rank", prio) AS "rank",
    arg_min(source, prio) AS source
FROM stg_claims
GROUP BY subject, property, object_qid, object_value

-- Properties around each entity of $qids (VARCHAR[]) with truthy claim counts, both directions.
-- Reads views kg_by_subject and kg_by_object.
SELECT
    subject AS qid,
    property AS pid,
    'out' AS direction,
    count(*) AS n
FROM kg_by_subject
WHERE subject IN (SELECT unnest($qids))
GROUP BY subject, property
UNION ALL
SELECT
    object_qid AS qid,
    property AS pid,
    'in' AS direction,
    count(*) AS n
FROM kg_by_object
WHERE object_qid IN (SELECT unnest($qids))
GROUP BY object_qid, property

-- English label per entity and property id, sorted by id. Inputs: views kb_entities, kb_properties.
SELECT
    qid AS id,
    label
FROM kb_entities
WHERE label IS NOT NULL AND label <> '' AND regexp_full_match(qid, 'Q[1-9][0-9]*')
UNION ALL
SELECT
    pid AS id,
    label
FROM kb_properties
WHERE label IS NOT NULL AND label <> '' AND regexp_full_match(pid, 'P[1-9][0-9]*')
ORDER BY id

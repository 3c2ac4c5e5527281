-- Lower-cased English labels and aliases of entities (exact, case-insensitive label lookup), sorted by name.
-- Input: view kb_entities.
SELECT DISTINCT
    name,
    qid,
    is_alias
FROM (
    SELECT
        lower(label) AS name,
        qid,
        false AS is_alias
    FROM kb_entities
    WHERE label IS NOT NULL AND label <> ''
    UNION ALL
    SELECT
        lower(unnest(aliases)) AS name,
        qid,
        true AS is_alias
    FROM kb_entities
)
WHERE name IS NOT NULL AND name <> '' AND regexp_full_match(qid, 'Q[1-9][0-9]*')
ORDER BY name, qid, is_alias

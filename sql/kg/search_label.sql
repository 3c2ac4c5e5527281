-- Exact, case-insensitive label/alias lookup: for each text of $texts (VARCHAR[]), the entities whose lower-cased
-- English label or alias equals the lower-cased text; i = 1-based text position; alias_only = matched no label.
-- Reads view kg_names (sorted by name).
WITH t AS (
    SELECT
        lower(unnest($texts)) AS name,
        generate_subscripts($texts, 1) AS i
)
SELECT
    t.i,
    n.qid,
    bool_and(n.is_alias) AS alias_only
FROM kg_names AS n
INNER JOIN t ON n.name = t.name
WHERE n.name IN (SELECT name FROM t)
GROUP BY t.i, n.qid
ORDER BY t.i, alias_only, CAST(substr(n.qid, 2) AS BIGINT)

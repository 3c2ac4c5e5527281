-- One row per qid: each field from the richest source that has it; aliases and instance_of from the
-- merged aliases and claims tables (instance_of: the non-deprecated P31 values); source = the richest source that contributed to the row. Sources of the same
-- priority (e.g. two dumps) are tie-broken by the value itself, so the result never depends on file or thread order.
-- Each field is arg_min(x, (prio, x)) computed as min(chr(48 + prio) || x) without its first character, as in
-- claims.sql (why, and the measurements, there): DuckDB's arg_min over a STRUCT key is its slow generic path.
WITH merged AS (
    SELECT
        qid,
        substr(min(chr(48 + prio) || label) FILTER (WHERE label <> ''), 2) AS label,
        substr(min(chr(48 + prio) || description) FILTER (WHERE description <> ''), 2) AS description,
        replace(substr(min(chr(48 + prio) || enwiki_title) FILTER (WHERE enwiki_title <> ''), 2), '_', ' ')
            AS enwiki_title,
        max(sitelinks) AS sitelinks,
        substr(min(chr(48 + prio) || source), 2) AS source
    FROM stg_entities
    WHERE qid LIKE 'Q%'
    GROUP BY qid
),
al AS (
    SELECT qid, list(alias ORDER BY alias) AS aliases
    FROM kb_aliases
    WHERE lang = 'en'
    GROUP BY qid
),
p31 AS (
    SELECT subject AS qid, list(DISTINCT object_qid ORDER BY object_qid) AS instance_of
    FROM kb_claims
    WHERE property = 'P31' AND object_qid IS NOT NULL AND coalesce("rank", 'normal') <> 'deprecated'
    GROUP BY subject
)
SELECT
    m.qid,
    m.label,
    m.description,
    coalesce(al.aliases, []::VARCHAR[]) AS aliases,
    m.enwiki_title,
    m.sitelinks,
    coalesce(p31.instance_of, []::VARCHAR[]) AS instance_of,
    m.source
FROM merged AS m
LEFT JOIN al USING (qid)
LEFT JOIN p31 USING (qid)

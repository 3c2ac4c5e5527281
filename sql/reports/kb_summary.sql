-- What is in each KB version? One row per published version: rows per KB table, rejected input records in
-- total and by reason (the reason's text up to its first ':' or quote, so values do not split the counts,
-- prefixed with the reader stage), and whether it is the latest version (the one the latest_* views show).
WITH counts AS (
    SELECT kb_version, 'entities' AS tbl, count(*) AS n FROM entities GROUP BY kb_version
    UNION ALL
    SELECT kb_version, 'aliases' AS tbl, count(*) AS n FROM aliases GROUP BY kb_version
    UNION ALL
    SELECT kb_version, 'labels' AS tbl, count(*) AS n FROM labels GROUP BY kb_version
    UNION ALL
    SELECT kb_version, 'claims' AS tbl, count(*) AS n FROM claims GROUP BY kb_version
    UNION ALL
    SELECT kb_version, 'properties' AS tbl, count(*) AS n FROM properties GROUP BY kb_version
    UNION ALL
    SELECT kb_version, 'articles' AS tbl, count(*) AS n FROM articles GROUP BY kb_version
    UNION ALL
    SELECT kb_version, 'passages' AS tbl, count(*) AS n FROM passages GROUP BY kb_version
    UNION ALL
    SELECT kb_version, 'redirects' AS tbl, count(*) AS n FROM redirects GROUP BY kb_version
    UNION ALL
    SELECT kb_version, 'rejects' AS tbl, count(*) AS n FROM rejects GROUP BY kb_version
),

reasons AS (
    SELECT
        kb_version,
        coalesce(stage, '?') || ': ' || regexp_replace(reason, '\s*[:''"].*$', '') AS reason_kind,
        count(*) AS n
    FROM rejects
    GROUP BY ALL
),

reasons_by_version AS (
    SELECT
        kb_version,
        map(list(reason_kind ORDER BY n DESC, reason_kind), list(n ORDER BY n DESC, reason_kind)) AS rejects_by_reason
    FROM reasons
    GROUP BY kb_version
),

latest AS (
    SELECT DISTINCT kb_version FROM latest_entities
    UNION
    SELECT DISTINCT kb_version FROM latest_claims
)

SELECT
    c.kb_version,
    c.kb_version IN (SELECT kb_version FROM latest) AS is_latest,
    coalesce(sum(c.n) FILTER (WHERE c.tbl = 'entities'), 0) AS entities,
    coalesce(sum(c.n) FILTER (WHERE c.tbl = 'aliases'), 0) AS aliases,
    coalesce(sum(c.n) FILTER (WHERE c.tbl = 'labels'), 0) AS labels,
    coalesce(sum(c.n) FILTER (WHERE c.tbl = 'claims'), 0) AS claims,
    coalesce(sum(c.n) FILTER (WHERE c.tbl = 'properties'), 0) AS properties,
    coalesce(sum(c.n) FILTER (WHERE c.tbl = 'articles'), 0) AS articles,
    coalesce(sum(c.n) FILTER (WHERE c.tbl = 'passages'), 0) AS passages,
    coalesce(sum(c.n) FILTER (WHERE c.tbl = 'redirects'), 0) AS redirects,
    coalesce(sum(c.n) FILTER (WHERE c.tbl = 'rejects'), 0) AS rejects,
    coalesce(any_value(r.rejects_by_reason), MAP {}) AS rejects_by_reason
FROM counts AS c
LEFT JOIN reasons_by_version AS r ON c.kb_version = r.kb_version
WHERE c.kb_version IS NOT NULL
GROUP BY c.kb_version
ORDER BY c.kb_version

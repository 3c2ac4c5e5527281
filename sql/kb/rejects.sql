SELECT source_file, "offset", line, reason, snippet, stage FROM stg_rejects
UNION ALL
-- Coordinate halves whose other half no shard staged (sql/kb/stg_claims_paired.sql joins the pairs).
SELECT
    source AS source_file,
    NULL AS "offset",
    NULL AS line,
    'coordinate ' || replace(max(datatype), 'coordinate-', '') || ' without its other half' AS reason,
    subject || ' ' || property || ' ' || max(object_value) AS snippet,
    'merge' AS stage
FROM stg_claims
WHERE datatype IN ('coordinate-latitude', 'coordinate-longitude')
GROUP BY subject, property, "rank", source, prio
HAVING count(DISTINCT datatype) = 1

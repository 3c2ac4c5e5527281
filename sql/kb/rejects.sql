SELECT source_file, "offset", line, reason, snippet, stage FROM stg_rejects
UNION ALL
-- Coordinate halves whose other half no shard staged (sql/kb/stg_claims_paired.sql joins the whole pairs).
SELECT
    source AS source_file,
    NULL AS "offset",
    NULL AS line,
    'coordinate ' || CASE WHEN lat IS NULL THEN 'longitude' ELSE 'latitude' END || ' without its other half'
        AS reason,
    subject || ' ' || property || ' ' || coalesce(lat, lon) AS snippet,
    'merge' AS stage
FROM stg_coordinate_halves
WHERE lat IS NULL OR lon IS NULL

-- The staged claims with each coordinate staged as two halves (LitWD's P625_Latitude / P625_Longtiude lines:
-- tasks/dumps/triples.py, COORDINATE_HALVES) joined into one globe-coordinate claim "lat,lon" (the JSON dump's
-- form) per subject, property, rank and source, wherever the shards cut the file. A half without its other half
-- is left out here and listed in rejects (sql/kb/rejects.sql). Made a view by tasks/kb/merge._register_staging;
-- sql/kb/claims.sql reads it.
WITH halves AS (
    SELECT
        subject,
        property,
        "rank",
        source,
        prio,
        max(object_value) FILTER (WHERE datatype = 'coordinate-latitude') AS lat,
        max(object_value) FILTER (WHERE datatype = 'coordinate-longitude') AS lon
    FROM stg_claims
    WHERE datatype IN ('coordinate-latitude', 'coordinate-longitude')
    GROUP BY subject, property, "rank", source, prio
)
SELECT subject, property, object_qid, object_value, datatype, "rank", source, prio
FROM stg_claims
WHERE coalesce(datatype, '') NOT IN ('coordinate-latitude', 'coordinate-longitude')
UNION ALL
SELECT subject, property, NULL, lat || ',' || lon, 'globe-coordinate', "rank", source, prio
FROM halves
WHERE lat IS NOT NULL AND lon IS NOT NULL

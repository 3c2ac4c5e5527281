-- Coordinates staged as two halves (LitWD's P625_Latitude / P625_Longtiude lines: tasks/dumps/triples.py,
-- COORDINATE_HALVES), one row per subject, property, rank and source with its latitude and longitude (NULL for a
-- half no shard staged), wherever the shards cut the file. sql/kb/stg_claims_paired.sql joins the whole pairs,
-- sql/kb/rejects.sql lists the lone halves. Made a view by tasks/kb/merge.pair_coordinate_halves.
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

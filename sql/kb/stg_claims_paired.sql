-- The staged claims with each coordinate staged as two halves (sql/kb/stg_coordinate_halves.sql) joined into one
-- globe-coordinate claim "lat,lon" (the JSON dump's form). A half without its other half is left out here and
-- listed in rejects (sql/kb/rejects.sql). Made a view by tasks/kb/merge.pair_coordinate_halves;
-- sql/kb/claims.sql reads it.
SELECT subject, property, object_qid, object_value, datatype, "rank", source, prio
FROM stg_claims
WHERE coalesce(datatype, '') NOT IN ('coordinate-latitude', 'coordinate-longitude')
UNION ALL
SELECT subject, property, NULL, lat || ',' || lon, 'globe-coordinate', "rank", source, prio
FROM stg_coordinate_halves
WHERE lat IS NOT NULL AND lon IS NOT NULL

-- One row per property id; each field from the richest source that has it.
SELECT
    pid,
    arg_min(label, prio) FILTER (WHERE label IS NOT NULL AND label <> '') AS label,
    arg_min(description, prio) FILTER (WHERE description IS NOT NULL AND description <> '') AS description,
    coalesce(arg_min(aliases, prio) FILTER (WHERE len(aliases) > 0), []::VARCHAR[]) AS aliases,
    arg_min(datatype, prio) FILTER (WHERE datatype IS NOT NULL) AS datatype
FROM stg_properties
GROUP BY pid

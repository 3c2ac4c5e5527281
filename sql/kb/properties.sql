-- One row per property id; each field from the richest source that has it (ties: by value).
SELECT
    pid,
    arg_min(label, (prio, label)) FILTER (WHERE label IS NOT NULL AND label <> '') AS label,
    arg_min(description, (prio, description)) FILTER (WHERE description IS NOT NULL AND description <> '') AS description,
    coalesce(arg_min(aliases, (prio, aliases)) FILTER (WHERE len(aliases) > 0), []::VARCHAR[]) AS aliases,
    arg_min(datatype, (prio, datatype)) FILTER (WHERE datatype IS NOT NULL) AS datatype
FROM stg_properties
GROUP BY pid

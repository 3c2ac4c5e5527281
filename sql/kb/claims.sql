-- Distinct claims (subject, property, object); datatype/rank/source each from the richest source (lowest prio)
-- that has a value, ties broken by the smallest value: the rule of arg_min(x, (prio, x)), which skips NULL x.
-- It is computed as the min of one string key per column, chr(48 + prio) || x (NULL when x is, so skipped too),
-- and the key's first character dropped: DuckDB compares strings byte by byte and UTF-8 keeps code point order,
-- so the key orders by prio, then x. arg_min over a STRUCT key is DuckDB's slow generic path: 29.5 s against
-- 9.6 s for 13.9 M staged claims (the claims of 1 M entities, 2 GB memory limit, 2 cores), and it grew faster
-- than linearly (kb build's merge: 4.8 s at 300k entities, 39.7 s at 1 M in make bench-scale). Same rows as the
-- STRUCT form on the sample's staged claims from every source (tests/unit/test_kb_merge_rule.py).
-- The rank is the exception: within the richest source, the strongest rank (preferred, then truthy, normal,
-- deprecated), as a statement stated twice with two ranks is truthy by its better one (Wikidata's truthy rule);
-- its key carries the strength as a second character.
-- Read from stg_claims_paired: the staged claims with coordinate halves joined (sql/kb/stg_claims_paired.sql).
SELECT
    subject,
    property,
    object_qid,
    object_value,
    substr(min(chr(48 + prio) || datatype), 2) AS datatype,
    substr(min(chr(48 + prio) || chr(48 + CASE "rank" WHEN 'preferred' THEN 0 WHEN 'truthy' THEN 1
        WHEN 'normal' THEN 2 WHEN 'deprecated' THEN 3 ELSE 4 END) || "rank"), 3) AS "rank",
    substr(min(chr(48 + prio) || source), 2) AS source
FROM stg_claims_paired
GROUP BY subject, property, object_qid, object_value

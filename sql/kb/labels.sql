-- One label per (qid, lang); the richest source wins (lowest priority number), ties broken by length,
-- then by the text itself (never by file or thread order): the rule of arg_min(label, (prio, length(label), label)).
-- Computed as the min of one string key, chr(48 + prio) || the length in 10 digits || label, with the key's first
-- 11 characters dropped, as in claims.sql (why there): DuckDB's arg_min over a STRUCT key is its slow generic path
-- (12.5-13.2 s against 9.1-9.3 s for 13.7 M staged labels, 2 GB memory limit, 2 cores). Same rows as the STRUCT
-- form on the sample's staged labels (tests/unit/test_kb_merge_rule.py).
SELECT
    qid,
    lang,
    substr(min(chr(48 + prio) || lpad(CAST(length(label) AS VARCHAR), 10, '0') || label), 12) AS label
FROM stg_labels
WHERE label IS NOT NULL AND label <> ''
GROUP BY qid, lang

-- One label per (qid, lang); the richest source wins (lowest priority number), ties broken by text.
SELECT qid, lang, arg_min(label, prio * 1000000 + length(label)) AS label
FROM stg_labels
WHERE label IS NOT NULL AND label <> ''
GROUP BY qid, lang

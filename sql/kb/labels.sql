-- One label per (qid, lang); the richest source wins (lowest priority number), ties broken by length,
-- then by the text itself (never by file or thread order).
SELECT qid, lang, arg_min(label, (prio, length(label), label)) AS label
FROM stg_labels
WHERE label IS NOT NULL AND label <> ''
GROUP BY qid, lang

-- English Wikipedia title -> QID, from sitelinks (dumps) and title maps; the richest source wins (ties: the lowest QID).
SELECT replace(enwiki_title, '_', ' ') AS title, arg_min(qid, (prio, qid)) AS qid
FROM stg_entities
WHERE enwiki_title IS NOT NULL AND enwiki_title <> ''
GROUP BY 1

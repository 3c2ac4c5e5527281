-- English Wikipedia title -> QID, from sitelinks (dumps) and title maps; the richest source wins (ties: the lowest
-- QID): the rule of arg_min(qid, (prio, qid)), computed as min(chr(48 + prio) || qid) without its first character,
-- as in claims.sql (why there). Same rows as the STRUCT form on the sample's staged entities
-- (tests/unit/test_kb_merge_rule.py).
SELECT
    replace(enwiki_title, '_', ' ') AS title,
    substr(min(chr(48 + prio) || qid), 2) AS qid
FROM stg_entities
WHERE enwiki_title IS NOT NULL AND enwiki_title <> ''
GROUP BY 1

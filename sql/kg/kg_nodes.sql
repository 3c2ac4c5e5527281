-- Named entities that are nodes of the KG: the subject or the item object of at least one claim, by id.
-- AnchorRAG's dense entity index embeds these (an entity outside the graph has no relations, so Eq. 2 scores it
-- 0 and no retriever could start from it). Inputs: views kb_entities, kb_claims.
WITH nodes AS (
    SELECT subject AS qid FROM kb_claims
    UNION
    SELECT object_qid AS qid FROM kb_claims WHERE object_qid IS NOT NULL
)

SELECT
    e.qid,
    e.label,
    e.description,
    e.enwiki_title
FROM kb_entities AS e
SEMI JOIN nodes AS n ON e.qid = n.qid
ORDER BY e.qid

-- Passages with the qid of their article.
SELECT DISTINCT ON (p.passage_id)
    p.passage_id,
    p.page_id,
    p.title,
    coalesce(p.qid, a.qid) AS qid,
    p.text
FROM stg_passages AS p
LEFT JOIN kb_articles AS a USING (page_id)
ORDER BY p.passage_id

-- One row per page id; qid from the reader (sitelinks) or else the title map.
SELECT
    a.page_id,
    a.title,
    coalesce(a.qid, tm.qid) AS qid,
    a.lead,
    a.text,
    a.n_words,
    a.source
FROM (
    SELECT *, row_number() OVER (PARTITION BY page_id ORDER BY prio, source) AS rn
    FROM stg_articles
) AS a
LEFT JOIN kb_title_map AS tm ON tm.title = a.title
WHERE a.rn = 1

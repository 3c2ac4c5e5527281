-- One row per page id; qid from the reader (sitelinks), else the title map, else the title map matched
-- case-insensitively (article texts outside dumps, e.g. FactoidQA's "Gray_Wolf" for "Gray wolf").
SELECT
    a.page_id,
    a.title,
    coalesce(a.qid, tm.qid, tmi.qid) AS qid,
    a.lead,
    a.text,
    a.n_words,
    a.source
FROM (
    SELECT *, row_number() OVER (PARTITION BY page_id ORDER BY prio, source, title, text) AS rn
    FROM stg_articles
) AS a
LEFT JOIN kb_title_map AS tm ON tm.title = a.title
LEFT JOIN (
    SELECT lower(title) AS ltitle, arg_min(qid, title) AS qid FROM kb_title_map GROUP BY 1
) AS tmi ON tmi.ltitle = lower(a.title)
WHERE a.rn = 1

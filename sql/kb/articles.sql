-- One row per page id; qid from the reader (sitelinks), else the title map, else the title map matched
-- case-insensitively (article texts outside dumps, e.g. FactoidQA's "Gray_Wolf" for "Gray wolf").
-- A page id staged more than once keeps its row first by (prio, source, title, text). Texts only stream: only
-- the pages staged more than once go through the window, and the title map is joined to the distinct titles
-- alone before their qids join the articles. The window and joins over whole rows (one text each) ran out of a
-- 2 GB limit at 1 M entities (60,907 staged articles, 1.6 GB of text, make bench-scale).
WITH dup AS (
    SELECT page_id FROM stg_articles GROUP BY page_id HAVING count(*) > 1
),
a AS (
    SELECT s.* FROM stg_articles AS s ANTI JOIN dup USING (page_id)
    UNION ALL BY NAME
    SELECT s.* FROM stg_articles AS s SEMI JOIN dup USING (page_id)
    QUALIFY row_number() OVER (PARTITION BY s.page_id ORDER BY s.prio, s.source, s.title, s.text) = 1
),
title_qid AS (
    SELECT t.title, coalesce(tm.qid, tmi.qid) AS qid
    FROM (SELECT DISTINCT title FROM stg_articles) AS t
    LEFT JOIN kb_title_map AS tm ON tm.title = t.title
    LEFT JOIN (
        SELECT lower(title) AS ltitle, arg_min(qid, title) AS qid FROM kb_title_map GROUP BY 1
    ) AS tmi ON tmi.ltitle = lower(t.title)
)
SELECT
    a.page_id,
    a.title,
    coalesce(a.qid, tq.qid) AS qid,
    a.lead,
    a.text,
    a.n_words,
    a.source
FROM a
LEFT JOIN title_qid AS tq ON tq.title = a.title

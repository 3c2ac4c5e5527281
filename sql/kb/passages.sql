-- Passages with the qid of their article, one row per passage id, in passage id order.
-- A passage id staged more than once (its page in two inputs or shards) keeps its row first by
-- (prio, source tag, title, text, qid), the keys articles.sql keeps a page by. The pick is per id, by the
-- window's own text: a page staged twice with different texts could get windows of both copies (the sample's
-- one such page, 316, does not). passage_id is not null in the staging schema (NULL ids would all pass the
-- ANTI JOIN).
-- Only those ids go through the window; the other rows stream to the sort. DISTINCT ON (passage_id) would be a
-- hash aggregate that holds every text, and keeps an arbitrary row of a duplicated id. On 2.5 M staged passages
-- copied from the sample's real ones (1.6 GB of text, 2 GB limit, 2 cores): 23.0-25.6 s with DISTINCT ON,
-- 13.2-19.0 s with this query; at a third of that 6.3 s (exponent 1.18) against 4.4 s (1.0).
WITH dup AS (
    SELECT passage_id FROM stg_passages GROUP BY passage_id HAVING count(*) > 1
),
p AS (
    SELECT s.* FROM stg_passages AS s ANTI JOIN dup USING (passage_id)
    UNION ALL BY NAME
    SELECT s.* FROM stg_passages AS s SEMI JOIN dup USING (passage_id)
    QUALIFY row_number() OVER (PARTITION BY s.passage_id ORDER BY s.prio, s._src, s.title, s.text, s.qid) = 1
)
SELECT
    p.passage_id,
    p.page_id,
    p.title,
    coalesce(p.qid, a.qid) AS qid,
    p.text
FROM p
LEFT JOIN kb_articles AS a USING (page_id)
ORDER BY p.passage_id

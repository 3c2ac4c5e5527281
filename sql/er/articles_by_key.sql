-- Articles an Entity Retrieval step needs, found by QID, by case-folded title or by source file.
-- Parameters: $files (article parquet parts), $qids, $titles (lower-cased), $sources.
SELECT page_id, title, qid, source, text
FROM read_parquet($files)
WHERE qid IN (SELECT unnest($qids))
   OR lower(title) IN (SELECT unnest($titles))
   OR source IN (SELECT unnest($sources))
ORDER BY page_id < 0, page_id

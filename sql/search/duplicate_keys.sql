-- How many distinct non-empty keys occur on more than one row of a KB table (view kb_table), the key trimmed as
-- the BM25 builders trim it ({key} is a column name from code, never user text). 0: every row has its own key,
-- so the builders keep no set of seen keys (memory that grows with the input: ~10 GB for 115 M QIDs).
-- GROUP BY spills to disk under the connection's memory limit.
SELECT count(*) AS duplicated_keys
FROM (
    SELECT trim(CAST({key} AS VARCHAR)) AS k
    FROM kb_table
    GROUP BY k
    HAVING k <> '' AND count(*) > 1
)

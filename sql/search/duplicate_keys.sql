-- How many distinct non-empty keys occur on more than one row of a KB table (view kb_table), the key trimmed as
-- the BM25 builders trim it, with Python's str.strip(): every character str.isspace() accepts ({key} is a column
-- name from code, never user text; DuckDB's trim() alone strips only spaces). 0: every row has its own key, so
-- the builders keep no set of seen keys (memory that grows with the input: ~10 GB for 115 M QIDs).
-- GROUP BY spills to disk under the connection's memory limit.
SELECT count(*) AS duplicated_keys
FROM (
    SELECT
        regexp_replace(
            CAST({key} AS VARCHAR),
            '^[\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]+|[\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]+$',
            '',
            'g'
        ) AS k
    FROM kb_table
    GROUP BY k
    HAVING k <> '' AND count(*) > 1
)

-- Truthy claims sorted by subject: the physical order lets a lookup by subject read only the row groups
-- (Parquet) or blocks (DuckDB table, ART index) that hold those subjects. Input: view kg_claims. The subject
-- alone is the key: lookups order a subject's claims themselves (outgoing.sql, tasks.kg.base.fact_sort_key),
-- and four keys cost the sort ~10% more (1 M-entity scale KB, 13.6 M claims: 8.1 s -> 7.4 s for this table).
SELECT
    subject,
    property,
    object_qid,
    object_value,
    datatype
FROM kg_claims
ORDER BY subject

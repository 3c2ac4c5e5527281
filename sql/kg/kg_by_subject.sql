-- Truthy claims sorted by subject: the physical order lets a lookup by subject read only the row groups
-- (Parquet) or blocks (DuckDB table, ART index) that hold those subjects. Input: view kg_claims.
SELECT
    subject,
    property,
    object_qid,
    object_value,
    datatype
FROM kg_claims
ORDER BY subject, property, object_qid, object_value

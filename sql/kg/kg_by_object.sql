-- Item-valued truthy claims sorted by object: incoming lookups read only the blocks that hold those objects.
-- Input: view kg_claims. The object alone is the key (incoming.sql orders an object's claims itself).
SELECT
    subject,
    property,
    object_qid,
    object_value,
    datatype
FROM kg_claims
WHERE object_qid IS NOT NULL
ORDER BY object_qid

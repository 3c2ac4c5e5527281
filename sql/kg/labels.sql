-- English labels of the entity/property ids in $ids (VARCHAR[]). Reads view kg_labels (sorted by id).
SELECT
    id,
    label
FROM kg_labels
WHERE id IN (SELECT unnest($ids))

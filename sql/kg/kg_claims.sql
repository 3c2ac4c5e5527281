-- Truthy claims, Wikidata's wdt: rule: best rank per (subject, property). Preferred claims hide normal ones,
-- deprecated claims are dropped, claims from truthy dumps (rank 'truthy') are already best-rank and kept.
-- Only well-formed ids and no <somevalue>/<novalue> placeholders. Inputs: view kb_claims (one KB version)
-- and table kg_preferred (kg_preferred.sql over the same claims; both made by tasks.kg.truthy). Shared by
-- the DuckDB KG index (kg_by_subject, kg_by_object) and the N-Triples export, so every backend sees the
-- same claims. kg_preferred holds distinct pairs, so the left join repeats no claim.
SELECT
    c.subject,
    c.property,
    c.object_qid,
    CASE WHEN c.object_qid IS NULL THEN c.object_value END AS object_value,
    c.datatype
FROM kb_claims AS c
LEFT JOIN kg_preferred AS p ON p.subject = c.subject AND p.property = c.property
WHERE
    coalesce(c."rank", 'normal') <> 'deprecated'
    AND regexp_full_match(c.subject, '[QP][1-9][0-9]*')
    AND regexp_full_match(c.property, 'P[1-9][0-9]*')
    AND CASE
        WHEN c.object_qid IS NOT NULL THEN regexp_full_match(c.object_qid, '[QP][1-9][0-9]*')
        ELSE c.object_value IS NOT NULL AND c.object_value NOT IN ('<somevalue>', '<novalue>')
    END
    AND (c."rank" IN ('preferred', 'truthy') OR p.subject IS NULL)

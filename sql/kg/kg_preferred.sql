-- (subject, property) pairs that have a preferred-rank claim: their normal-rank claims are not truthy.
-- Input: view kb_claims. Materialised once as temp table kg_preferred (tasks.kg.truthy), so that kg_claims
-- joins the claims against this small, exactly counted table; as a CTE or a correlated NOT EXISTS, DuckDB
-- 2.0 built its hash table on all the claims instead (or grouped every claim's pair first), which grows
-- with the KB and spills.
SELECT DISTINCT
    subject,
    property
FROM kb_claims
WHERE "rank" = 'preferred'

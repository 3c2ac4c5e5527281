-- Share of each run's items per failure stage, in the family's order; runs without stages (KGQA) have no rows.
SELECT
    run_id,
    method,
    dataset,
    split,
    family,
    stage,
    stage_rank,
    count(*) AS items,
    count(*) / sum(count(*)) OVER (PARTITION BY run_id) AS share
FROM stages
GROUP BY run_id, method, dataset, split, family, stage, stage_rank
ORDER BY dataset, split, method, run_id, stage_rank

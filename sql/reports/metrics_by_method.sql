-- Quality metrics of the latest run of each (method, dataset, split), one row per run.
SELECT
    m.method,
    m.dataset,
    m.split,
    any_value(m.n) FILTER (WHERE m.metric = 'wall_s') AS n,
    max(m.value) FILTER (WHERE m.metric = 'precision') AS "precision",
    max(m.value) FILTER (WHERE m.metric = 'recall') AS recall,
    max(m.value) FILTER (WHERE m.metric = 'accuracy') AS accuracy,
    max(m.value) FILTER (WHERE m.metric = 'micro_f1') AS micro_f1,
    max(m.value) FILTER (WHERE m.metric = 'recall@10') AS "recall@10",
    max(m.value) FILTER (WHERE m.metric = 'recall@50') AS "recall@50",
    max(m.value) FILTER (WHERE m.metric = 'em') AS em,
    max(m.value) FILTER (WHERE m.metric = 'f1') AS f1,
    max(m.value) FILTER (WHERE m.metric = 'acc_sub') AS acc_sub,
    max(m.value) FILTER (WHERE m.metric = 'strategyqa_acc') AS strategyqa_acc,
    max(m.value) FILTER (WHERE m.metric = 'invalid_count') AS invalid_count,
    max(m.value) FILTER (WHERE m.metric = 'hit1') AS hit1,
    max(m.value) FILTER (WHERE m.metric = 'qald_macro_f1_gerbil') AS qald_macro_f1_gerbil,
    max(m.value) FILTER (WHERE m.metric = 'qald_macro_f1_mean') AS qald_macro_f1_mean,
    max(m.value) FILTER (WHERE m.metric = 'hits@1') AS "hits@1",
    max(m.value) FILTER (WHERE m.metric = 'hits@10') AS "hits@10",
    max(m.value) FILTER (WHERE m.metric = 'hit1_tog') AS hit1_tog,
    max(m.value) FILTER (WHERE m.metric = 'error_count') AS errors,
    max(m.value) FILTER (WHERE m.metric = 'wall_s') AS wall_s,
    m.run_id
FROM latest_metrics AS m
GROUP BY m.method, m.dataset, m.split, m.run_id
ORDER BY m.dataset, m.method

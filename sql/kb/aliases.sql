-- One row per distinct (qid, alias, lang) over every staged source.
SELECT DISTINCT qid, trim(alias) AS alias, lang
FROM stg_aliases
WHERE alias IS NOT NULL AND trim(alias) <> ''

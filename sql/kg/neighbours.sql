-- Truthy claims for (entity, property, direction) requests given as parallel lists $qids, $pids, $dirs
-- (VARCHAR[]; direction 'out' = entity is the subject, 'in' = entity is the object). Each row names the
-- request it answers. Reads views kg_by_subject and kg_by_object.
WITH req AS (
    SELECT
        unnest($qids) AS qid,
        unnest($pids) AS pid,
        unnest($dirs) AS dir
)
SELECT
    r.qid AS req_qid,
    r.pid AS req_pid,
    r.dir AS req_dir,
    c.subject,
    c.property,
    c.object_qid,
    c.object_value,
    c.datatype
FROM kg_by_subject AS c
INNER JOIN req AS r ON c.subject = r.qid AND c.property = r.pid AND r.dir = 'out'
WHERE c.subject IN (SELECT qid FROM req WHERE dir = 'out')
UNION ALL
SELECT
    r.qid AS req_qid,
    r.pid AS req_pid,
    r.dir AS req_dir,
    c.subject,
    c.property,
    c.object_qid,
    c.object_value,
    c.datatype
FROM kg_by_object AS c
INNER JOIN req AS r ON c.object_qid = r.qid AND c.property = r.pid AND r.dir = 'in'
WHERE c.object_qid IN (SELECT qid FROM req WHERE dir = 'in')

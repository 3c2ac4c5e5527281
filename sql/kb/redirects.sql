SELECT DISTINCT title, target FROM stg_redirects

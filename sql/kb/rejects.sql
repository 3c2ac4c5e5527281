SELECT source_file, "offset", line, reason, snippet, stage FROM stg_rejects

"""search-recall: candidate recall@k of the BM25 entity search on gold mentions (no LLM)."""

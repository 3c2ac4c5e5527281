"""Text QA methods: closed-book, BM25 and dense passage RAG, Entity Retrieval (ER); prompts/qa_prompts.json."""

"""Prefect-free pieces of AnchorRAG and its ToG baseline: prompt output parsers, relation-aware grounding, triples."""

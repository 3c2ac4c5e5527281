"""Open-world KGQA methods (``anchorrag``, ``tog``, ``cot``; ../shared/papers/anchorrag-open-world-kgqa.md).

Modules: ``settings`` (``--set`` options), ``agents`` (prompts, retrieval rounds and the step machines),
``tools`` (the tools a run builds), ``method`` (the registered ``Method`` classes), ``parsing`` (prompt output
parsers), ``graph`` (relation-aware grounding, triples), ``prompts/``.
"""

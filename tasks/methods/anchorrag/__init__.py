"""Open-world KGQA methods (``anchorrag``, ``tog``, ``cot``; ../shared/papers/anchorrag-open-world-kgqa.md).

Modules: ``method`` (settings, step machines, registration), ``parsing`` (prompt output parsers), ``graph``
(relation-aware grounding, triples), ``prompts/``.
"""

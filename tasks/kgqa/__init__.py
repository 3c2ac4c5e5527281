"""kgqa: Prefect-free helpers of the KGQA methods (``kg-1hop``, ``react-kg``, KGQA ``closed-book``).

Modules: ``parsing`` (tolerant JSON extraction from LLM output), ``answers`` (answer post-processing to the
datasets' formats), ``context`` (KG facts and property lists rendered into bounded prompt messages),
``tools`` (the batched KG tools agents call), ``kb_gold`` (the answers the local KB gives to a question's
gold SPARQL query).
"""

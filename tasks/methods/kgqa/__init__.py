"""KGQA methods: ``kg-1hop``, ``react-kg``, ``closed-book`` on KGQA data (../shared/papers/qald10-react-wikidata.md).

Modules: ``settings`` (``--set`` options), ``agents`` (prompt building and the step machines), ``tools``
(the tools a run builds), ``method`` (the registered ``Method`` classes), ``parsing`` (tolerant JSON extraction from LLM
output), ``answers`` (answer post-processing to the datasets' formats), ``kb_gold`` (the answers the local KB
gives to a question's gold SPARQL query), ``prompts/``. The KG tools and fact rendering they share with
AnchorRAG are ``tasks.methods.kg_tools`` and ``tasks.methods.kg_context``.
"""

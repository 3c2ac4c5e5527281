"""Entity alignment on DBP15K (EA-Agent, ../shared/papers/ea-agent-entity-alignment.md); Prefect-free.

Modules: ``kg`` (the two knowledge graphs: raw DBP15K files -> KB-like tables, neighbourhoods),
``selectors`` (Attribute/Relation Triple Selectors, Eq. 1-2), ``reward`` (Eq. 3-6), ``embed`` (the
embedding candidate generator behind ``ea-embed``), ``prompts`` (EA-Agent prompt rendering and parsing).
"""

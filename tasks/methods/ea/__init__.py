"""Entity alignment on DBP15K (``ea-embed``, ``ea-agent``; ../shared/papers/ea-agent-entity-alignment.md).

Modules: ``embed_method`` and ``agent_method`` (settings, step machines, registration), ``selectors``
(Attribute/Relation Triple Selectors, Eq. 1-2), ``reward`` (Eq. 3-6), ``embed`` (the embedding candidate
generator behind ``ea-embed``), ``translit`` (name normalisation), ``prompting`` (EA-Agent prompt rendering and
reply parsing), ``prompts/``. The two knowledge graphs are read by the loader ``tasks.datasets.ea_kg``.
"""

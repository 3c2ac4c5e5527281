"""methods: the method contract, registry and batching runtime, one folder per method family (Prefect-free).

``base`` (``Method``, settings, context), ``registry`` (name -> class), ``runtime`` (generator step machines
advanced in batches), ``prompt_files`` (how a family reads and hashes its ``prompts/``), ``kg_tools`` and
``kg_context`` (KG tools and bounded fact rendering shared by ``kgqa/`` and ``anchorrag/``). Families:
``ela``, ``search_recall``, ``qa``, ``kgqa``, ``anchorrag``, ``ea``.
"""

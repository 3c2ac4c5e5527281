"""agents: Prefect-free library code (never imports prefect)."""

"""metrics: Prefect-free library code (never imports prefect)."""

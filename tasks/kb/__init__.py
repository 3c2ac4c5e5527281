"""kb: plan, stage and merge a knowledge-base build (Prefect-free)."""

"""runs: plan, execute and finalize sharded method runs (Prefect-free)."""

"""Storage layer: schemas, paths/versions, atomic Parquet I/O, manifests and the DuckDB catalog."""

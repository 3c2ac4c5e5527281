"""Report code without Prefect: the catalog's report views as text tables and the executed report notebooks."""

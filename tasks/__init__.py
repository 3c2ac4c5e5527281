"""Thin Prefect task wrappers (modules directly here) and Prefect-free library subpackages."""

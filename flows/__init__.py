"""Prefect flows (composition only) and the ``linkedqa`` command line."""

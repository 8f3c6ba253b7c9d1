"""Prefect Blocks for infopt."""

"""vLLM: the adapter (adapter.py) and its tuning ladder's rules (rules.py)."""

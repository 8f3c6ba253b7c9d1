"""MLX-LM's mlx_lm.server: the adapter (adapter.py); it has no tuning rules of its own."""

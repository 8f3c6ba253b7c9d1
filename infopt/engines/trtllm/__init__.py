"""TensorRT-LLM's trtllm-serve: the adapter (adapter.py), its tuning ladder's rules
(rules.py) and the LLM API's argument models its YAML is checked against (args.py)."""

"""The quality gate: a candidate configuration's answers against a higher-precision reference
(token fidelity under teacher forcing, with a noise floor)."""

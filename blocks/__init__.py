"""Prefect Blocks for infopt: settings saved once (UI or code) and loaded by name.

- `InfoptCredentials`: Hugging Face and GitHub tokens (SecretStr).
- `EngineRuntime`: one engine build (binary, virtual environment or image) and its version.
- `ClusterTarget`: a Kubernetes cluster's GPU nodes (context, namespace, selector, tolerations).
- `ResultsStore`: where run folders are copied as they are written (local path or fsspec URL).

Register the four block types with the Prefect server that PREFECT_API_URL names (once per
server, and again after a block's fields change), from the repository root:

    PYTHONPATH=. prefect block register -m blocks

then create blocks in the UI (Blocks -> +) or in code, e.g.

    ResultsStore(url="s3://bucket/infopt-runs", storage_options={"endpoint_url": URL},
                 key=KEY_ID, secret=SECRET).save("runs")

and use them by name: `infopt optimize --results-store runs`, or the `optimize` flow's
`results_store` parameter.
"""

from blocks.cluster import ClusterTarget
from blocks.credentials import InfoptCredentials
from blocks.results_store import ResultsStore
from blocks.runtime import EngineRuntime

__all__ = ["ClusterTarget", "EngineRuntime", "InfoptCredentials", "ResultsStore"]

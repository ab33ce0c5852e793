"""kvright: the Kubernetes operator that right-sizes vLLM deployments, and its ``kvright`` CLI.

Importing this package imports nothing heavy; the operator's modules (kopf, kubernetes, prometheus)
load only when used, so ``kvright plan`` stays a fast process.
"""

__version__ = "0.1.0"

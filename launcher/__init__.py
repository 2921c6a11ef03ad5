"""launcher: a Kubernetes-native launcher for LLM training runs."""

__version__ = "0.1.0"

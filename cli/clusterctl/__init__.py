"""clusterctl: bring up GPU clusters for LLM training from one declarative spec."""

__version__ = "0.1.0"

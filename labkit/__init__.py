"""DRA LabKit: learn, teach and experiment with Kubernetes Dynamic Resource Allocation for GPUs."""

__version__ = "0.1.0"

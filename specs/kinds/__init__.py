"""The resource kinds as pydantic models (Cluster, CodeSnapshot, Job, Workspace, Quotas, Dataset, Model).
May import: base, diagnostics, errors, address, duration, secrets."""

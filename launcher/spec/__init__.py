"""The run spec: models, loading with positions, overrides, mcli compatibility."""

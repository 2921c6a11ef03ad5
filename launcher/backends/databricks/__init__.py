"""The Databricks backend: a run is a one-time job run (Jobs API 2.2 runs/submit) on a new
job cluster or on serverless GPU compute, driven through databricks-sdk."""

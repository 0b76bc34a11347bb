"""Import-time runtime patches, each gated by its own environment variable.

This package must stay importable without jinja2/yaml/packaging: it runs inside training jobs.
"""

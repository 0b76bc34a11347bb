"""Locks: inputs, resolution with uv, PEP 751 and requirements files, diff, gate, consistency, mirror."""

"""The snapshot's collectors, one module per area (registered in ``snapshot.registry``), and
the readers only they use (``gpu_facts``, ``nvml``, ``nvml_child``)."""

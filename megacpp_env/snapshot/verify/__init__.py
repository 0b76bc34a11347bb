"""The integrity engine and the snapshot's caches: RECORD verification in worker processes
(``integrity``, ``integrity_worker``, ``crew``), started early (``early``), and every cache the
snapshot keeps, each validated before use (``cachefile``, ``probe_cache``, ``checkout_cache``)."""

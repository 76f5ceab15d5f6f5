"""``iorig serve`` and ``--metrics``: the results and the running runs on
the web and to Prometheus (docs/guide/live.md)."""

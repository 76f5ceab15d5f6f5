"""Reports of stored runs and comparisons: what is shown (``tables``) and how
it is written (``writers``), behind one exporter interface."""

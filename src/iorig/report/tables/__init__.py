"""What is shown: every table and series of a run or a comparison as plain
data (``TableModel``), built once from an analysis; the writers render it."""

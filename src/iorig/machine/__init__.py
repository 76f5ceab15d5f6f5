"""What iorig holds or changes on this machine beyond one process, and what
it puts back when a run was killed: locks on targets (``locks``), records of
block-throttle caps to restore (``throttles``), and what a dead run left in
TMPDIR and in its targets (``leftovers``). Everything here lives in one
machine-wide directory (``statedir``), and each record carries its owner
(pid, process start time, boot id: ``store.owner``) so a live run's is never
touched."""

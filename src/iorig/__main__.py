"""``python -m iorig``: the same as the ``iorig`` command."""

from iorig.entry import main

main()

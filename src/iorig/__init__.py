"""iorig: an open storage benchmarking rig built on fio."""

__version__ = "0.1.0"

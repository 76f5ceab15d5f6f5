"""A file's data in the page cache: how much of it is there (``mincore``
over a read-only mapping, which faults nothing in) and leaving none of it
there (``fsync``, then ``posix_fadvise(DONTNEED)``).

Buffered reads of data the page cache holds measure memory: a target
written with buffered I/O just before is still in it, dirty pages and all,
and ``DONTNEED`` drops clean pages only, so the data is written back first.
fio does the same for each file it opens (its ``invalidate``, on by
default), which drops what is clean then.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import stat
from pathlib import Path

PAGE_BYTES = mmap.PAGESIZE
WINDOW_BYTES = 1 << 30  # mapped at a time: a vector of 256 Ki pages of 4 KiB
_PROT_READ = 0x1
_MAP_SHARED = 0x01
_MAP_FAILED = ctypes.c_void_p(-1).value
_RESIDENT_BIT = bytes(i & 1 for i in range(256))

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte))


def _size(fd: int) -> int:
    st = os.fstat(fd)
    if stat.S_ISBLK(st.st_mode):
        return os.lseek(fd, 0, os.SEEK_END)
    return st.st_size


def _resident_window(fd: int, start: int, length: int) -> int:
    """Pages of ``[start, start + length)`` (``start`` page-aligned) in the cache."""
    address = _libc.mmap(None, length, _PROT_READ, _MAP_SHARED, fd, start)
    if address in (None, _MAP_FAILED):
        raise OSError(ctypes.get_errno(), "mmap")
    try:
        pages = -(-length // PAGE_BYTES)
        vector = (ctypes.c_ubyte * pages)()
        if _libc.mincore(address, length, vector) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        # bit 0 of each byte: the page is resident (the others are reserved)
        return bytes(vector).translate(_RESIDENT_BIT).count(1)
    finally:
        _libc.munmap(address, length)


def resident_bytes(path: Path, offset_bytes: int = 0, length_bytes: int | None = None) -> int:
    """Bytes of ``[offset, offset + length)`` of a file or block device that
    the page cache holds (whole pages; the region is cut at the end of the
    file). Raises OSError where it cannot be read."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        end = _size(fd)
        if length_bytes is not None:
            end = min(end, offset_bytes + length_bytes)
        start = offset_bytes - offset_bytes % PAGE_BYTES
        pages = 0
        while start < end:
            length = min(WINDOW_BYTES, end - start)
            pages += _resident_window(fd, start, length)
            start += length
        return pages * PAGE_BYTES
    finally:
        os.close(fd)


def drop_cached(path: Path) -> None:
    """Write back and drop a file's (or block device's) pages from the page
    cache. Raises OSError where it cannot."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)  # dirty pages are written back first: DONTNEED skips them
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)

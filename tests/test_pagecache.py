"""A file's pages in the page cache, measured (mincore) and dropped (fsync,
then fadvise DONTNEED), on a real file of the test's own: what a prefill
leaves and what the audit says a buffered read phase found there."""

from __future__ import annotations

import os

import pytest

from iorig.machine.pagecache import PAGE_BYTES, drop_cached, resident_bytes

MiB = 1 << 20


@pytest.fixture
def written(tmp_path):
    path = tmp_path / "data.bin"
    with path.open("wb") as f:
        f.write(os.urandom(8 * MiB))  # buffered: dirty in the page cache, not yet written back
    if resident_bytes(path) == 0:
        pytest.skip("this filesystem keeps no file pages in the page cache")
    return path


def test_a_file_just_written_is_in_the_page_cache_and_dropping_it_leaves_none(written):
    assert resident_bytes(written) == 8 * MiB  # dirty pages count too
    drop_cached(written)  # written back first: DONTNEED alone skips dirty pages
    assert resident_bytes(written) == 0


def test_what_is_read_again_is_in_the_page_cache_region_by_region(written):
    drop_cached(written)
    with written.open("rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)  # no readahead
        f.seek(2 * MiB)
        f.read(MiB)
    assert resident_bytes(written, 2 * MiB, MiB) == MiB
    assert resident_bytes(written, 0, 2 * MiB) == 0 and resident_bytes(written, 3 * MiB) == 0
    # a region not on a page boundary counts its whole pages, and ends with the file
    assert resident_bytes(written, 3 * MiB - 100, 200) == PAGE_BYTES
    assert resident_bytes(written, 2 * MiB, 100 * MiB) == MiB


def test_a_file_that_is_not_there_is_an_error(tmp_path):
    with pytest.raises(OSError):
        resident_bytes(tmp_path / "missing")
    with pytest.raises(OSError):
        drop_cached(tmp_path / "missing")

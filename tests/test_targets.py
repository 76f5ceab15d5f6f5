"""Target safety: block devices that hold data are refused unless the user
offers them, mounted devices always; files iorig did not create are not
overwritten; space and permissions are checked before anything starts."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from iorig.errors import UserError
from iorig.targets import MARK_XATTR, release, resolve_target
from iorig.targets.block import signature

MiB = 1024 * 1024


# ------------------------------------------------------------------ files


def test_directory_target_gets_a_marked_data_file_that_is_removed_after(tmp_path):
    target = resolve_target(
        f"{tmp_path}/", role="data", size=8 * MiB, size_explicit=True, allow_destroy=False
    )
    assert target.kind == "directory" and target.path == tmp_path / "iorig-data.dat"
    assert target.created and target.remove_after
    assert os.getxattr(target.path, MARK_XATTR) == b"1"
    release(target, keep=False)
    assert not target.path.exists()


def test_kept_data_file_is_reused_without_allow_destroy(tmp_path):
    first = resolve_target(
        f"{tmp_path}/", role="data", size=MiB, size_explicit=True, allow_destroy=False
    )
    first.path.write_bytes(b"\0" * MiB)  # as if a run had filled it
    release(first, keep=True)
    again = resolve_target(
        f"{tmp_path}/", role="data", size=MiB, size_explicit=True, allow_destroy=False
    )
    assert again.path == first.path and not again.created and not again.remove_after


def test_file_target_creates_missing_parents(tmp_path):
    target = resolve_target(
        str(tmp_path / "a" / "b" / "data"),
        role="data",
        size=MiB,
        size_explicit=True,
        allow_destroy=False,
    )
    assert target.kind == "file" and target.path.exists() and not target.remove_after


def test_foreign_file_needs_allow_destroy(tmp_path):
    precious = tmp_path / "precious"
    precious.write_text("keep me")
    with pytest.raises(UserError, match="refusing to overwrite") as err:
        resolve_target(
            str(precious), role="data", size=MiB, size_explicit=True, allow_destroy=False
        )
    assert "--allow-destroy" in (err.value.hint or "")
    assert precious.read_text() == "keep me"
    allowed = resolve_target(
        str(precious), role="data", size=MiB, size_explicit=True, allow_destroy=True
    )
    assert allowed.path == precious


def test_free_space_is_checked_before_creating_anything(tmp_path):
    with pytest.raises(UserError, match="not enough free space") as err:
        resolve_target(
            f"{tmp_path}/sub/",
            role="data",
            size=2**60,
            size_explicit=True,
            allow_destroy=False,
        )
    assert "--size" in (err.value.hint or "")
    assert not (tmp_path / "sub").exists()


def test_unwritable_location_is_reported(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="cannot create"):
        resolve_target(
            str(blocker / "data"), role="data", size=MiB, size_explicit=True, allow_destroy=False
        )


@pytest.mark.parametrize(
    ("offset", "magic", "what"),
    [
        (0x438, b"\x53\xef", "ext2/3/4"),
        (0, b"XFSB", "XFS"),
        (512, b"EFI PART", "GPT"),
        (510, b"\x55\xaa", "MBR"),
        (4086, b"SWAPSPACE2", "swap"),
    ],
)
def test_signature_fallback_without_blkid(tmp_path, offset, magic, what):
    image = tmp_path / "image"
    data = bytearray(0x11000)
    data[offset : offset + len(magic)] = magic
    image.write_bytes(bytes(data))
    assert what in (signature(image, blkid=None) or "")
    image.write_bytes(bytes(0x11000))
    assert signature(image, blkid=None) is None


# ------------------------------------------------------------ block devices


@pytest.fixture
def loopdev(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("creating loop devices needs root")
    if not shutil.which("losetup"):
        pytest.skip("losetup (util-linux) is not installed")
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(64 * MiB)
    done = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"this machine does not allow loop devices: {done.stderr.strip()}")
    dev = Path(done.stdout.strip())
    mountpoint = tmp_path / "mnt"
    try:
        yield dev
    finally:
        if os.path.ismount(mountpoint):
            subprocess.run(["umount", str(mountpoint)], check=False)
        subprocess.run(["losetup", "-d", str(dev)], check=False)


def _digest(dev: Path) -> str:
    with open(dev, "rb") as f:
        return hashlib.sha256(f.read(4 * MiB)).hexdigest()


def _mkfs(dev: Path) -> None:
    if not shutil.which("mkfs.ext4"):
        pytest.skip("mkfs.ext4 (e2fsprogs) is not installed")
    subprocess.run(["mkfs.ext4", "-q", "-F", str(dev)], check=True)


def _adhoc(iorig, dev: Path, *extra: str):
    return iorig(
        "run",
        "--rw",
        "randread",
        "--bs",
        "4k",
        "--duration",
        "1s",
        "--size",
        "8MiB",
        "--target",
        str(dev),
        *extra,
    )


@pytest.mark.blockdev
@pytest.mark.fio
def test_blank_device_is_used(iorig, loopdev):
    result = _adhoc(iorig, loopdev)
    assert result.returncode == 0, result.stdout + result.stderr
    shown = json.loads(iorig("show", "last", "--json", check=True).stdout)
    (target,) = shown["run"]["targets"]
    assert target["kind"] == "block" and target["device_size_bytes"] == 64 * MiB
    assert target["size_bytes"] == 8 * MiB


@pytest.mark.blockdev
@pytest.mark.fio
def test_device_with_filesystem_is_refused_and_untouched(iorig, loopdev, db_path):
    _mkfs(loopdev)
    before = _digest(loopdev)
    result = _adhoc(iorig, loopdev)
    assert result.returncode == 2
    assert "refusing to write" in result.stderr and "ext4" in result.stderr
    assert "--allow-destroy" in result.stderr
    assert _digest(loopdev) == before
    assert not db_path.exists()
    forced = _adhoc(iorig, loopdev, "--allow-destroy")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert _digest(loopdev) != before  # the prefill did overwrite it, as asked


@pytest.mark.blockdev
@pytest.mark.fio
def test_mounted_device_is_refused_even_with_allow_destroy(iorig, loopdev, tmp_path):
    _mkfs(loopdev)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    mounted = subprocess.run(["mount", str(loopdev), str(mountpoint)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount here: {mounted.stderr.decode().strip()}")
    result = _adhoc(iorig, loopdev, "--allow-destroy")
    assert result.returncode == 2
    assert "mounted" in result.stderr


@pytest.mark.blockdev
@pytest.mark.fio
def test_a_device_mounted_in_another_mount_namespace_is_refused_and_untouched(
    iorig, loopdev, tmp_path
):
    """This namespace's mount table does not show it (on main iorig wrote
    16 MiB into the mounted ext4, e2fsck exit 8); the kernel holds the
    device all the same, and opening it with O_EXCL says so (EBUSY)."""
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")
    _mkfs(loopdev)
    mountpoint = tmp_path / "elsewhere"
    mountpoint.mkdir()
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         f"mount {loopdev} {mountpoint} && echo mounted && exec sleep 120"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        line = holder.stdout.readline() if holder.stdout else ""
        if line.strip() != "mounted":
            pytest.skip(f"cannot mount in a new namespace here: {holder.stderr.read().strip()}")
        assert not os.path.ismount(mountpoint)  # not in this namespace's table
        before = _digest(loopdev)
        result = _adhoc(iorig, loopdev, "--allow-destroy")
        assert result.returncode == 2, result.stdout + result.stderr
        assert "in use by the system" in result.stderr and "mount namespace" in result.stderr
        assert _digest(loopdev) == before
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(10)


@pytest.mark.blockdev
@pytest.mark.fio
def test_device_with_partition_table_is_refused(iorig, loopdev):
    if not shutil.which("sfdisk"):
        pytest.skip("sfdisk (fdisk package) is not installed")
    subprocess.run(
        ["sfdisk", "--quiet", str(loopdev)], input="label: gpt\n,,L\n", text=True, check=True
    )
    result = _adhoc(iorig, loopdev)
    assert result.returncode == 2
    assert "partition" in result.stderr


@pytest.mark.blockdev
@pytest.mark.fio
def test_a_device_that_takes_discards_is_sent_them(iorig, loopdev):
    """A loop device punches holes in its file for discards (its queue's
    discard_max_bytes > 0). The refusal of one that takes none is decided
    from its queue (tests/test_trims.py): setting discard_max_bytes to 0
    here would outlive the device, on the machine's loop device of that
    number, until it is removed."""
    if int(Path(f"/sys/block/{loopdev.name}/queue/discard_max_bytes").read_text()) == 0:
        pytest.skip(f"{loopdev} takes no discards on this machine")
    done = iorig(
        "run",
        "--rw",
        "randtrim",
        "--bs",
        "64k",
        "--duration",
        "1s",
        "--size",
        "8MiB",
        "--target",
        str(loopdev),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    shown = json.loads(iorig("show", "last", "--json", check=True).stdout)
    (phase,) = shown["phases"]
    assert [d["ddir"] for d in phase["directions"]] == ["trim"] and phase["ios"] > 0
    assert "falloc" not in shown["engines"]  # a device is sent discards, not hole punches

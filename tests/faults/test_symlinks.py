"""Nothing iorig writes follows a symbolic link it did not create: a link at
the place of a data file iorig names (in a directory target) or of a file
in a kept file set would make iorig, then fio, create, grow and fill the
file it points to, anywhere."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from iorig.errors import UserError
from iorig.targets import identity, identity_change, resolve_target

QUICK = ("run", "--rw", "randread", "--size", "1MiB", "--duration", "1s")


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A directory outside the target, where links point."""
    path = tmp_path / "elsewhere"
    path.mkdir()
    return path


@pytest.mark.parametrize("kind", ["dangling", "empty file"])
def test_a_link_at_the_data_files_place_is_refused_and_not_followed(tmp_path, elsewhere, kind):
    victim = elsewhere / "victim.bin"
    if kind == "empty file":
        victim.touch()
    target = tmp_path / "target"
    target.mkdir()
    (target / "iorig-data.dat").symlink_to(victim)
    with pytest.raises(UserError, match="is a symbolic link") as refused:
        resolve_target(
            f"{target}/", role="data", size=1 << 20, size_explicit=True, allow_destroy=False
        )
    assert str(victim) in str(refused.value)
    assert victim.exists() == (kind == "empty file")
    assert not victim.exists() or victim.stat().st_size == 0
    assert sorted(p.name for p in target.iterdir()) == ["iorig-data.dat"]  # the link, untouched


@pytest.mark.fio
@pytest.mark.system
def test_the_command_line_refuses_it_before_any_run(iorig, tmp_path, elsewhere):
    victim = elsewhere / "victim.bin"
    target = tmp_path / "target"
    target.mkdir()
    (target / "iorig-data.dat").symlink_to(victim)
    done = iorig(*QUICK, "--target", f"{target}/")
    said = done.stdout + done.stderr
    assert done.returncode == 2 and "is a symbolic link" in said, said
    assert not victim.exists()
    assert json.loads(iorig("runs", "--json").stdout)["runs"] == []


def _kept_file_set(tmp_path: Path, elsewhere: Path) -> tuple[Path, Path]:
    """A file set an earlier run kept (``--keep-files``), one of whose files
    someone replaced by a link to a file elsewhere."""
    home = tmp_path / "set" / "iorig-data"
    (home / "d0").mkdir(parents=True)
    try:
        os.setxattr(home, "user.iorig", b"1")
    except OSError:
        pytest.skip("this filesystem keeps no user extended attributes (iorig's mark)")
    (home / "d0" / "f0").write_bytes(b"x" * 4096)
    victim = elsewhere / "victim.bin"
    victim.write_bytes(b"mine")
    (home / "d0" / "f1").symlink_to(victim)
    return home, victim


def test_a_kept_file_set_holding_a_link_is_refused(tmp_path, elsewhere):
    home, victim = _kept_file_set(tmp_path, elsewhere)
    with pytest.raises(UserError, match="f1 is a symbolic link"):
        resolve_target(
            f"{home.parent}/",
            role="data",
            size=1 << 20,
            size_explicit=True,
            allow_destroy=False,
            fileset=True,
        )
    assert victim.read_bytes() == b"mine"


def test_a_file_of_a_file_set_replaced_by_a_link_mid_run_is_named_before_the_next_phase(
    tmp_path, elsewhere
):
    home, victim = _kept_file_set(tmp_path, elsewhere)
    (home / "d0" / "f1").unlink()
    target = resolve_target(
        f"{home.parent}/",
        role="data",
        size=1 << 20,
        size_explicit=True,
        allow_destroy=False,
        fileset=True,
    )
    before = identity(target)
    assert before is not None and identity_change(target, before, identity(target)) is None
    (home / "d0" / "f0").unlink()
    (home / "d0" / "f0").symlink_to(victim)
    change = identity_change(target, before, identity(target))
    assert change is not None and "f0" in change and "symbolic link" in change


def test_a_data_file_replaced_by_a_link_mid_run_is_a_replaced_target(tmp_path, elsewhere):
    target = resolve_target(
        f"{tmp_path}/t/", role="data", size=1 << 20, size_explicit=True, allow_destroy=False
    )
    before = identity(target)
    victim = elsewhere / "victim.bin"
    victim.write_bytes(b"\0" * (1 << 20))  # as large as the data file: only a link tells
    target.path.unlink()
    target.path.symlink_to(victim)
    assert "was replaced" in (identity_change(target, before, identity(target)) or "")


def test_the_mark_never_lands_on_a_links_target(tmp_path, elsewhere):
    from iorig.targets import release

    target = resolve_target(
        f"{tmp_path}/t/", role="data", size=1 << 20, size_explicit=True, allow_destroy=False
    )
    victim = elsewhere / "victim.bin"
    victim.write_bytes(b"user data")
    target.path.unlink()
    target.path.symlink_to(victim)
    release(target, keep=True)  # a kept file is marked again for the next run
    with pytest.raises(OSError):
        os.getxattr(victim, "user.iorig")

"""Full disclosure of the system under test, read from the machine.

Each ``collect_*`` function reads one thing and fails soft: whatever it
cannot read is recorded as an error string instead of raising, so a missing
file never stops a run. ``disclose`` assembles them; ``interface_limit``
derives the smallest known bandwidth limit on the path to the target
(docs/methodology.md §8). Nothing here is invented: a virtual disk without a PCIe
link has an unknown limit.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iorig.model import Disclosure, InterfaceLimit

SYS = Path("/sys")
PROC = Path("/proc")

# Usable bytes/s per lane after line encoding (docs/methodology.md §8).
PCIE_LANE_BYTES_PER_S = {
    2.5: 250e6,
    5.0: 500e6,
    8.0: 985e6,
    16.0: 1.97e9,
    32.0: 3.94e9,
    64.0: 7.56e9,
}
SATA_BYTES_PER_S = {1.5: 150e6, 3.0: 300e6, 6.0: 600e6}
SAS_LANE_BYTES_PER_S = {3.0: 300e6, 6.0: 600e6, 12.0: 1.2e9, 22.5: 2.4e9}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _soft(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


# ----------------------------------------------------------------- host


def collect_host() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "machine": platform.machine()}


def collect_os() -> dict[str, Any]:
    info: dict[str, Any] = {"kernel": platform.release(), "kernel_version": platform.version()}
    release = _read(Path("/etc/os-release")) or ""
    fields = dict(
        line.split("=", 1)
        for line in release.splitlines()
        if "=" in line and not line.startswith("#")
    )
    info["os"] = fields.get("PRETTY_NAME", "").strip('"') or platform.system()
    virt = _virtualization()
    if virt:
        info["virtualization"] = virt
    return info


def _virtualization() -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["systemd-detect-virt"], capture_output=True, text=True, timeout=5, check=False
        )
        if done.returncode == 0 and done.stdout.strip() not in ("", "none"):
            return done.stdout.strip()
    cpuinfo = _read(PROC / "cpuinfo") or ""
    return "hypervisor (cpu flag)" if re.search(r"^flags.*\bhypervisor\b", cpuinfo, re.M) else None


def _cpu_list(cpus: set[int]) -> str:
    """{0, 1, 2, 5} -> '0-2,5' (the kernel's cpulist format)."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def _cgroup_cpu_quota() -> float | None:
    """CPUs' worth of time this process's cgroup may use (cgroup v2 cpu.max or
    v1 cpu.cfs_quota_us / cpu.cfs_period_us); None when unlimited or unknown.
    The tightest quota on the path from the process's cgroup up counts."""
    quotas: list[float] = []
    for line in (_read(PROC / "self/cgroup") or "").splitlines():
        hierarchy, controllers, path = [*line.split(":", 2), "", ""][:3]
        if hierarchy == "0" and controllers == "":
            base, files = SYS / "fs/cgroup", ("cpu.max",)
            if not (base / "cgroup.controllers").exists():
                base = SYS / "fs/cgroup/unified"
        elif "cpu" in controllers.split(","):
            base, files = SYS / "fs/cgroup" / controllers, ("cpu.cfs_quota_us",)
            if not base.exists():
                base = SYS / "fs/cgroup/cpu"
        else:
            continue
        folder = base / path.lstrip("/")
        while True:
            if files == ("cpu.max",):
                quota, _, period = (_read(folder / "cpu.max") or "max").partition(" ")
            else:
                quota = _read(folder / "cpu.cfs_quota_us") or "-1"
                period = _read(folder / "cpu.cfs_period_us") or ""
            with contextlib.suppress(ValueError, ZeroDivisionError):
                if quota not in ("max", "-1"):
                    quotas.append(int(quota) / int(period))
            if folder == base:
                break
            folder = folder.parent
    return min(quotas) if quotas else None


def usable_cpus() -> tuple[float, str]:
    """How many CPUs' worth this process (and the fio it starts) may use —
    its affinity (taskset, cpusets) capped by any cgroup CPU quota — and the
    affinity as a CPU list."""
    allowed = os.sched_getaffinity(0)
    quota = _cgroup_cpu_quota()
    count = float(len(allowed))
    return (min(count, quota) if quota else count), _cpu_list(allowed)


def collect_cpu() -> dict[str, Any]:
    cpuinfo = _read(PROC / "cpuinfo") or ""
    models = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    sockets = set(re.findall(r"^physical id\s*:\s*(\d+)$", cpuinfo, re.M))
    cpu_dir = SYS / "devices/system/cpu"
    governors = sorted(
        {g for p in cpu_dir.glob("cpu[0-9]*/cpufreq/scaling_governor") if (g := _read(p))}
    )
    max_khz = [
        int(v) for p in cpu_dir.glob("cpu[0-9]*/cpufreq/cpuinfo_max_freq") if (v := _read(p))
    ]
    usable, affinity = usable_cpus()
    return {
        "model": models[0] if models else platform.processor() or "unknown",
        "logical_cpus": os.cpu_count(),
        # what fio may use: a VM, taskset, cpuset or CPU quota can leave fewer
        # CPUs than jobs, and then the generator, not the storage, is the limit
        "usable_cpus": usable,
        "affinity": affinity,
        "cgroup_cpu_quota": _cgroup_cpu_quota(),
        "sockets": len(sockets) or None,
        "governor": ", ".join(governors) or "unknown (no cpufreq)",
        "max_mhz": max(max_khz) / 1000 if max_khz else None,
    }


def collect_memory() -> dict[str, Any]:
    meminfo = _read(PROC / "meminfo") or ""
    values = {k: int(v) * 1024 for k, v in re.findall(r"^(\w+):\s+(\d+) kB", meminfo, re.M)}
    return {
        "total_bytes": values.get("MemTotal"),
        "available_bytes": values.get("MemAvailable"),
        "swap_bytes": values.get("SwapTotal"),
    }


def collect_mitigations() -> dict[str, str]:
    folder = SYS / "devices/system/cpu/vulnerabilities"
    if not folder.is_dir():
        return {}
    return {p.name: _read(p) or "" for p in sorted(folder.iterdir())}


def collect_fio(fio: str, version: str, engines: list[str]) -> dict[str, Any]:
    return {"path": fio, "version": version, "engines": engines}


# ---------------------------------------------------------------- storage


def _mountinfo() -> list[dict[str, str]]:
    mounts = []
    for line in (_read(PROC / "self/mountinfo") or "").splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or len(tail) < 3:
            continue
        mounts.append(
            {
                "devnum": fields[2],
                "mountpoint": fields[4].replace("\\040", " "),
                "options": fields[5],
                "fstype": tail[0],
                "source": tail[1],
                "super_options": tail[2],
            }
        )
    return mounts


def mount_of(path: Path) -> dict[str, str] | None:
    """The mount holding ``path`` (longest matching mount point)."""
    resolved = str(path.resolve())
    best = None
    for m in _mountinfo():
        mp = m["mountpoint"]
        inside = resolved == mp or resolved.startswith(mp.rstrip("/") + "/")
        if inside and (best is None or len(mp) >= len(best["mountpoint"])):
            best = m
    return best


def _block_name(devnum: str) -> str | None:
    link = SYS / "dev/block" / devnum
    with contextlib.suppress(OSError):
        return link.resolve().name
    return None


def backing_devices(name: str) -> list[str]:
    """Whole disks under a block device: partitions to their disk, dm/md
    devices to their slaves, recursively."""
    node = SYS / "class/block" / name
    if not node.exists():
        return []
    slaves = (
        sorted(p.name for p in (node / "slaves").iterdir()) if (node / "slaves").is_dir() else []
    )
    if slaves:
        return sorted({d for s in slaves for d in backing_devices(s)})
    if (node / "partition").exists():
        return [node.resolve().parent.name]
    return [name]


def _pcie_link(device_dir: Path) -> dict[str, Any] | None:
    """PCIe link of the PCI function at or above ``device_dir``."""
    probe = device_dir.resolve()
    for _ in range(6):
        speed = _read(probe / "current_link_speed")
        if speed is not None:
            width = _read(probe / "current_link_width")
            link = {
                "pci_address": probe.name,
                "current_speed": speed,
                "current_width": width,
                "max_speed": _read(probe / "max_link_speed"),
                "max_width": _read(probe / "max_link_width"),
            }
            gts = re.match(r"([\d.]+)\s*GT/s", speed or "")
            lanes = int(width) if width and width.isdigit() else 0
            if gts and lanes and float(gts.group(1)) in PCIE_LANE_BYTES_PER_S:
                link["usable_bytes_per_s"] = PCIE_LANE_BYTES_PER_S[float(gts.group(1))] * lanes
            return link
        probe = probe.parent
    return None


def _sata_link(device_dir: Path) -> dict[str, Any] | None:
    resolved = str(device_dir.resolve())
    match = re.search(r"/(ata\d+)/", resolved)
    if not match:
        return None
    for link in (SYS / "class/ata_link").glob(f"link{match.group(1)[3:]}*"):
        speed = _read(link / "sata_spd")
        gbps = re.match(r"([\d.]+) Gbps", speed or "")
        if gbps:
            rate = SATA_BYTES_PER_S.get(float(gbps.group(1)))
            return {"sata_speed": speed, "usable_bytes_per_s": rate}
    return None


def collect_block_device(name: str) -> dict[str, Any]:
    node = SYS / "block" / name
    queue = node / "queue"
    device = node / "device"
    sectors = _read(node / "size")
    info: dict[str, Any] = {
        "name": name,
        "model": _read(device / "model"),
        "vendor": _read(device / "vendor"),
        "firmware": _read(device / "firmware_rev") or _read(device / "rev"),
        "serial": _read(device / "serial"),
        "size_bytes": int(sectors) * 512 if sectors and sectors.isdigit() else None,
        "rotational": _read(queue / "rotational") == "1",
        "scheduler": _read(queue / "scheduler"),
        "nr_requests": _read(queue / "nr_requests"),
        "logical_block_size": _read(queue / "logical_block_size"),
        "physical_block_size": _read(queue / "physical_block_size"),
        "write_cache": _read(queue / "write_cache"),
        "transport": _transport(name, device),
    }
    if name.startswith("nvme"):
        # the namespace's controller is the PCI function
        info["model"] = info["model"] or _read(device / "model")
        info["firmware"] = info["firmware"] or _read(device / "firmware_rev")
    link = None
    if info["transport"] == "nvme-pcie":
        link = _pcie_link(device / "device") or _pcie_link(device)
    elif info["transport"] == "ata":
        link = _sata_link(device)
    info["link"] = link
    if name.startswith("loop"):
        info["loop"] = _loop(node)
    return info


def _loop(node: Path) -> dict[str, Any] | None:
    """What a loop device reads and writes: its file, whether through the
    page cache (direct I/O off: a block read or written before is answered
    from memory) and the filesystem the file is on; None when it has none."""
    backing = _read(node / "loop" / "backing_file")
    if not backing:
        return None
    mount = mount_of(Path(backing)) if Path(backing).exists() else None
    return {
        "backing_file": backing,
        "direct_io": _read(node / "loop" / "dio") == "1",
        "backing_filesystem": mount["fstype"] if mount else None,
    }


def _transport(name: str, device: Path) -> str:
    resolved = str(device.resolve()) if device.exists() else ""
    if name.startswith("nvme"):
        transport = _read(device / "transport") or "pcie"
        return f"nvme-{transport}"
    if name.startswith("vd") or "/virtio" in resolved:
        return "virtio"
    if "/ata" in resolved:
        return "ata"
    if ("/host" in resolved and "/sas" in resolved) or "/end_device" in resolved:
        return "sas"
    if name.startswith(("loop", "dm-", "md", "zram", "ram", "nbd", "rbd")):
        return re.sub(r"\d+$", "", name.split("-")[0])
    if "/usb" in resolved:
        return "usb"
    return "unknown"


def collect_target(path: Path, kind: str) -> dict[str, Any]:
    """Filesystem and backing devices of one target."""
    info: dict[str, Any] = {"path": str(path), "kind": kind}
    if kind == "block":
        st = os.stat(path)
        devnum = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        name = _block_name(devnum)
        info["filesystem"] = None
    else:
        mount = mount_of(path)
        info["filesystem"] = (
            {
                "type": mount["fstype"],
                "mountpoint": mount["mountpoint"],
                "options": mount["options"],
                "super_options": mount["super_options"],
                "source": mount["source"],
            }
            if mount
            else None
        )
        name = _block_name(mount["devnum"]) if mount else None
    disks = backing_devices(name) if name else []
    info["device"] = name
    info["backing_devices"] = [_soft(collect_block_device, d) for d in disks]
    root = mount_of(Path("/"))
    root_disks = set(backing_devices(_block_name(root["devnum"]) or "")) if root else set()
    info["shares_os_device"] = bool(root_disks & set(disks))
    return info


def collect_nics() -> list[dict[str, Any]]:
    nics = []
    for node in sorted((SYS / "class/net").glob("*")):
        if node.name == "lo" or not (node / "device").exists():
            continue  # virtual interfaces (bridges, veth, tun) have no device
        speed = _read(node / "speed")
        nics.append(
            {
                "name": node.name,
                "speed_mbps": int(speed)
                if speed and speed.lstrip("-").isdigit() and int(speed) > 0
                else None,
                "mtu": _read(node / "mtu"),
                "operstate": _read(node / "operstate"),
            }
        )
    return nics


def disclose(targets: list[tuple[Path, str]], fio: dict[str, Any]) -> Disclosure:
    """Everything iorig can read about the system under test."""
    sections = {
        "host": _soft(collect_host),
        "os": _soft(collect_os),
        "cpu": _soft(collect_cpu),
        "memory": _soft(collect_memory),
        "mitigations": _soft(collect_mitigations),
        "fio": fio,
        "targets": [_soft(collect_target, path, kind) for path, kind in targets],
        "nics": _soft(collect_nics),
    }
    return Disclosure(sections, interface_limit(sections["targets"]))


def interface_limit(targets: list[Any]) -> InterfaceLimit | None:
    """The smallest known link bandwidth under the targets, with its source.

    Returns None when no device on the path has a known link (virtual disks,
    loop devices, network filesystems): the limit is unknown, not guessed.
    """
    best = None
    for target in targets:
        if not isinstance(target, dict):
            continue
        for dev in target.get("backing_devices", []):
            link = dev.get("link") if isinstance(dev, dict) else None
            rate = (link or {}).get("usable_bytes_per_s")
            if rate and (best is None or rate < best.bytes_per_s):
                where = link.get("pci_address") or link.get("sata_speed") or ""
                best = InterfaceLimit(float(rate), f"{dev['name']} {where}".strip())
    return best

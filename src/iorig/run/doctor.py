"""`iorig doctor`: what could distort a benchmark on this target, checked
before anything runs, and what a data pattern really compresses to."""

from __future__ import annotations

import hashlib
import os
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from iorig.analyze.audit import check_target_location
from iorig.analyze.generator import CEILING_FRACTION, Ceiling, GeneratorShape
from iorig.errors import UserError
from iorig.fio import runner
from iorig.fio.jobfile import Section, render
from iorig.fio.runner import FioProcess
from iorig.machine.sysinfo import collect_fio, disclose, usable_cpus
from iorig.model import Disclosure, Finding, InterfaceLimit
from iorig.run.generator import measure_ceiling
from iorig.run.local import LocalBackend
from iorig.run.probe import spot_in
from iorig.units import format_bytes

SAMPLE_BYTES = 64 * 1024 * 1024
DEDUPE_BLOCK = 4096


@dataclass(frozen=True)
class TargetReport:
    path: Path
    kind: str
    disclosure: Disclosure
    engine: str | None
    findings: list[Finding]
    limit: InterfaceLimit | None


def _existing(path: Path) -> Path:
    probe = path
    while not probe.exists():
        probe = probe.parent
    return probe


def examine(given: str, fio_path: str | None = None) -> TargetReport:
    """Read-only look at a target: nothing is created except a probe file
    that is removed at once (and nothing at all on a block device)."""
    fio = runner.find_fio(fio_path)
    version = runner.fio_version(fio)
    path = Path(given).expanduser()
    existing = _existing(path.resolve())
    is_block = existing == path.resolve() and path.is_block_device()
    kind = "block" if is_block else ("directory" if existing.is_dir() else "file")
    location = existing if is_block or existing.is_dir() else existing.parent
    findings: list[Finding] = []
    engine = None
    try:
        local = LocalBackend(fio, version)
        engine = local.probe({"local": spot_in(location, block_device=is_block)}, direct=True)
    except UserError as exc:
        findings.append(
            Finding(
                "no-direct-io",
                f"direct I/O does not work at {location}: {exc.message}",
                exc.hint or "test a disk-backed filesystem",
            )
        )
    disclosure = disclose([(existing, kind)], collect_fio(fio, version, [engine] if engine else []))
    located = check_target_location(disclosure)
    findings += located + _machine_checks(disclosure)
    in_memory = any(f.code == "memory-backed" for f in located)
    limit = disclosure.interface_limit
    if limit is None:
        findings.append(
            Finding(
                "limit-unknown",
                "no device on the path reports its link speed (virtual, network or loop "
                "device): results cannot be checked against an interface limit",
                "pass a known limit to `iorig compare --limit`",
                severity="info",
            )
        )
    if not is_block and not in_memory:  # direct I/O on RAM keeps nothing from the page cache
        vfs = os.statvfs(location)
        free = vfs.f_bavail * vfs.f_frsize
        memory = disclosure.memory_bytes or 0
        if memory and free < 2 * memory:
            findings.append(
                Finding(
                    "small-filesystem",
                    f"{format_bytes(free)} free at {location}: a working set of twice the RAM "
                    f"({format_bytes(2 * memory)}) does not fit, so only direct I/O gives "
                    "numbers free of the page cache",
                    "keep direct I/O on (the default)",
                    severity="info",
                )
            )
    return TargetReport(path, kind, disclosure, engine, findings, limit)


def _machine_checks(disclosure: Disclosure) -> list[Finding]:
    out = []
    governor = str((disclosure.section("cpu") or {}).get("governor", ""))
    if governor and "performance" not in governor and "unknown" not in governor:
        out.append(
            Finding(
                "cpu-governor",
                f"CPU frequency governor is {governor}: clock changes add latency jitter",
                "set the performance governor for benchmark runs (cpupower frequency-set -g "
                "performance)",
                severity="info",
            )
        )
    return out


@dataclass(frozen=True)
class DataPatternReport:
    compress_pct: float
    dedupe_pct: float
    sample_bytes: int
    zlib_ratio: float  # compressed / original
    duplicate_fraction: float  # of 4 KiB blocks

    @property
    def saved_by_compression(self) -> float:
        return 1.0 - self.zlib_ratio


def measure_data_pattern(
    compress_pct: float,
    dedupe_pct: float,
    directory: Path | None = None,
    fio_path: str | None = None,
    sample_bytes: int = SAMPLE_BYTES,
) -> DataPatternReport:
    """Write a sample of ``sample_bytes`` with fio using iorig's data
    options, then measure what a real compressor (zlib, level 6) and 4 KiB
    block deduplication achieve."""
    fio = runner.find_fio(fio_path)
    with tempfile.TemporaryDirectory(prefix="iorig-data-", dir=directory) as tmp:
        sample = Path(tmp) / "sample.bin"
        options: dict = {
            "filename": str(sample),
            "rw": "write",
            "bs": 128 * 1024,
            "size": sample_bytes,
            "refill_buffers": True,
        }
        if compress_pct:
            options |= {
                "buffer_compress_percentage": round(compress_pct),
                "buffer_compress_chunk": 4096,
            }
        if dedupe_pct:
            options["dedupe_percentage"] = round(dedupe_pct)
        job = Path(tmp) / "sample.fio"
        job.write_text(render({}, [Section("sample", options)]))
        done = FioProcess(fio, job, Path(tmp), status=False).run(timeout_s=300)
        if done.stopped_by == "timeout":
            raise UserError("fio took more than 5 minutes to write the data sample")
        if done.returncode != 0:
            raise UserError(f"fio could not write the data sample: {done.stderr.strip()[-300:]}")
        data = sample.read_bytes()
    compressed = len(zlib.compress(data, 6))
    blocks = [
        hashlib.blake2b(data[i : i + DEDUPE_BLOCK], digest_size=16).digest()
        for i in range(0, len(data), DEDUPE_BLOCK)
    ]
    return DataPatternReport(
        compress_pct=compress_pct,
        dedupe_pct=dedupe_pct,
        sample_bytes=len(data),
        zlib_ratio=compressed / len(data),
        duplicate_fraction=1.0 - len(set(blocks)) / len(blocks),
    )


@dataclass(frozen=True)
class GeneratorReport:
    ceiling: Ceiling
    fio_version: str
    usable_cpus: float
    affinity: str
    seconds: float

    @property
    def measurable_iops(self) -> float:
        """Above this a phase's rate is as much fio's as the storage's (the
        audit's threshold)."""
        return CEILING_FRACTION * self.ceiling.iops


def measure_generator(
    shape: GeneratorShape, seconds: float = 2.0, fio_path: str | None = None
) -> GeneratorReport:
    """What fio can generate on this machine with ``shape``, on its null
    engine (no file is opened, nothing is written)."""
    fio = runner.find_fio(fio_path)
    version = runner.fio_version(fio)
    ceiling = measure_ceiling(LocalBackend(fio, version), ["local"], shape, seconds)
    if ceiling is None:
        raise UserError("fio's null engine completed no I/O", hint="check `fio --enghelp`")
    usable, affinity = usable_cpus()
    return GeneratorReport(ceiling, version, usable, affinity, seconds)

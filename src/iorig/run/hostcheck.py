"""``iorig hosts check``: whether each host of a multi-host run is fit to
run it, before the run — reached and authenticated, the driver's exact fio
and engines, its clock near the driver's (per-second series are aligned on
wall clocks), its CPUs, and the target's kind and free space.

Over SSH every figure is asked on the host itself; an ``iorig agent`` is
known by what its fio server says when probed (version, protocol, CPUs,
OS) and its clock (the control channel's TIME), and the rest is shown as
unknown. A ``tls://`` agent that refuses this machine's token or
certificate is a host with that problem.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from iorig.errors import UserError
from iorig.fio import runner, ssh
from iorig.fio.control import ControlError, HostControl, read_clock
from iorig.fio.hosts import HostAddress, HostSpec, SshHost, TlsHost
from iorig.fio.protocol import ServerInfo, local_protocol_version, server_versions

ENGINES = ("libaio", "io_uring", "posixaio", "psync")
CLOCK_LIMIT_S = 0.5  # hosts' seconds are aligned to within half a second plus this
CLOCK_SAMPLES = 3
PROBE_S = 5.0
# facts of an SSH host, one line each; the target (or the keeper's directory) is $1
FACTS = r"""
echo "cpus $(nproc 2>/dev/null || echo 0)"
for e in libaio io_uring posixaio psync; do
  fio --enghelp="$e" >/dev/null 2>&1 && echo "engine $e"
done
echo "kind $(stat -L -c %F -- "$1" 2>/dev/null || echo absent)"
if [ -b "$1" ]; then
  echo "free $(blockdev --getsize64 "$1" 2>/dev/null)"  # a device: its size
elif [ ! -c "$1" ]; then
  p=$1; [ -e "$p" ] || p=$(dirname -- "$p")
  df -P -B1 -- "$p" 2>/dev/null | awk 'NR == 2 { print "free " $4 }'
fi
exit 0
"""


@dataclass(frozen=True)
class HostFacts:
    """One host's fitness for a run; ``problems`` would spoil it."""

    host: str
    way: str  # "ssh", "tls" (an authenticated agent) or "agent"
    fio_version: str | None = None
    cpus: int | None = None
    os: str | None = None
    engines: tuple[str, ...] | None = None  # None: not known (an agent)
    clock_offset_s: float | None = None  # host's clock minus the driver's
    clock_error_s: float | None = None  # half the round trip it was read in
    target: str | None = None  # None: the keeper's directory (SSH), or unknown
    target_kind: str | None = None  # as stat(1) names it: "block special file" …
    free_bytes: int | None = None  # free space there; a block device's size
    problems: tuple[str, ...] = field(default_factory=tuple)


Clock = tuple[float, float]  # the host's clock minus this one's, and its error (s)


def _clock(sample: Callable[[], Clock]) -> Clock | None:
    """The host's clock offset and its error: of a few readings (each the
    host's time against the middle of its round trip, milliseconds over an
    open session), the one with the shortest round trip."""
    best: Clock | None = None
    for _ in range(CLOCK_SAMPLES):
        try:
            found = sample()
        except ValueError:
            continue
        except ControlError:  # not answering once, it would not the next time
            break
        if best is None or found[1] < best[1]:
            best = found
    return best


def _ssh_facts(connection: ssh.SshConnection, target: str | None) -> dict:
    where = target if target and target.startswith("/") else connection.remote_dir
    out = connection.run(["sh", "-c", FACTS, "iorig", where], timeout_s=15.0) or ""
    facts: dict = {"engines": [], "target": where if target else None}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        if key == "cpus" and value.isdigit():
            facts["cpus"] = int(value)
        elif key == "engine" and value in ENGINES:
            facts["engines"].append(value)
        elif key == "kind":
            facts["target_kind"] = value.strip()
        elif key == "free" and value.isdigit():
            facts["free_bytes"] = int(value)
    if (clock := _clock(lambda: read_clock(lambda: connection.request("TIME")))) is not None:
        facts["clock_offset_s"], facts["clock_error_s"] = clock
    return facts


def _local_engines(fio: str) -> tuple[str, ...]:
    return tuple(e for e in ENGINES if runner.run_quick([fio, f"--enghelp={e}"])[0] == 0)


def check_hosts(  # noqa: C901, PLR0912, PLR0915
    hosts: Sequence[HostSpec], fio: str, targets: dict[str, str] | None = None
) -> list[HostFacts]:
    """Every host's facts, checked against this machine's fio; a host that
    cannot be reached is a row with its reason, never an exception."""
    targets = targets or {}
    version = runner.fio_version(fio)
    engines = _local_engines(fio)
    over_ssh = [h for h in hosts if isinstance(h, SshHost)]
    over_tls = [h for h in hosts if isinstance(h, TlsHost)]
    connections: dict[str, ssh.SshConnection] = {}
    problems: dict[str, list[str]] = {h.label: [] for h in hosts}
    workdir = None
    agents = None
    if over_tls:
        from iorig.fio import tlsrelay  # asyncio and ssl: for tls:// hosts only

        agents = tlsrelay.AgentLinks(over_tls)
    if over_ssh:
        workdir, connections, failed = ssh.connect_each(over_ssh)
        for label, error in failed.items():
            problems[label].append(error.message.removeprefix(f"{label}: "))
    try:
        refused = agents.check() if agents is not None else {}
        for label, why in refused.items():
            problems[label].append(why)
        endpoints = {}
        clocks: dict[str, Callable[[], Clock]] = {}
        for host in hosts:
            if isinstance(host, HostAddress):
                endpoints[host.label] = host
                clocks[host.label] = HostControl(host).clock
            elif isinstance(host, TlsHost):
                if agents is not None and host.label not in refused:
                    endpoints[host.label] = agents.endpoint(host)
                    clocks[host.label] = agents.control(host).clock
            elif (connection := connections.get(host.label)) and connection.endpoint:
                endpoints[host.label] = connection.endpoint
        try:
            protocol = local_protocol_version(fio, timeout_s=PROBE_S)
        except UserError:
            protocol = None
        probed = server_versions(fio, list(endpoints.values()), PROBE_S, local_protocol=protocol)
        facts: dict[str, dict] = {}
        threads = []
        for label, connection in connections.items():

            def ask(label: str = label, connection: ssh.SshConnection = connection) -> None:
                facts[label] = _ssh_facts(connection, targets.get(label))

            threads.append(threading.Thread(target=ask, daemon=True))
        for label, sample in clocks.items():

            def read(label: str = label, sample: Callable[[], Clock] = sample) -> None:
                if (clock := _clock(sample)) is not None:
                    facts[label] = {"clock_offset_s": clock[0], "clock_error_s": clock[1]}

            threads.append(threading.Thread(target=read, daemon=True))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        if workdir is not None:
            ssh.close_all(workdir, connections)
        if agents is not None:
            agents.close()
    out = []
    for host in hosts:
        mine = problems[host.label]
        known = dict(facts.get(host.label, {}))
        result = probed.get(endpoints[host.label]) if host.label in endpoints else None
        if isinstance(result, ServerInfo):
            known.update(fio_version=result.fio_version, os=result.os)
            known.setdefault("cpus", result.cpus)
            if result.fio_version != version or (protocol and result.protocol != protocol):
                mine.append(
                    f"runs {result.fio_version} (protocol {result.protocol}), "
                    f"not this machine's {version} (protocol {protocol})"
                )
        elif result is not None:
            mine.append(f"its fio server did not answer: {result.detail}")
        if (found := known.get("engines")) is not None:
            known["engines"] = tuple(found)
            if missing := [e for e in engines if e not in found]:
                mine.append(f"lacks the engine(s) {', '.join(missing)} this machine has")
        offset, error = known.get("clock_offset_s"), known.get("clock_error_s") or 0.0
        if offset is not None and abs(offset) - error > CLOCK_LIMIT_S:
            mine.append(
                f"its clock is {offset:+.2f} s off this machine's: per-second series "
                "are aligned on wall clocks (keep the hosts in NTP sync)"
            )
        if known.get("target") and known.get("target_kind") == "directory":
            mine.append(f"the target {known.get('target')} is a directory, not a file or device")
        way = {HostAddress: "agent", SshHost: "ssh", TlsHost: "tls"}[type(host)]
        out.append(HostFacts(host.label, way, problems=tuple(mine), **known))
    return out

"""What reaching hosts over SSH or authenticated agents costs against
direct fio servers (issue 25).

Starts N real sshd on 127.0.0.20, … (as the tests do: tests/sshd.py, root
needed), N ``iorig agent --token-file`` on 127.0.0.30, … (tests/agents.py)
and N direct fio servers on 127.0.0.2, …, then measures:

  setup   opening every host's SSH connection, keeper and forwarded socket
          at once (``connect_all``), or every agent's relay with its
          authenticated check (``connect_agents``), and probing every fio
          server through them, against probing the direct servers
          (target: < 10 s for 16)
  run     the same paced random-read scenario each way: the aggregate IOPS
          (expected: N × the rate, the same on all) and the run's wall time

    .venv/bin/python bench/ssh_hosts.py [--hosts 16] [--rate 200] [--duration 6]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the tests' sshd and fio server helpers

from tests.agents import token_agents  # noqa: E402
from tests.fioservers import fio_servers, paced_scenario  # noqa: E402
from tests.sshd import ssh_hosts  # noqa: E402

from iorig.fio import runner, ssh, tlsrelay  # noqa: E402
from iorig.fio.protocol import local_protocol_version, server_versions  # noqa: E402


def _probe(addresses: list) -> float:
    fio = runner.find_fio(None)
    protocol = local_protocol_version(fio)
    began = time.monotonic()
    results = server_versions(fio, addresses, 10.0, local_protocol=protocol)
    took = time.monotonic() - began
    bad = [str(h) for h, r in results.items() if not hasattr(r, "fio_version")]
    if bad:
        raise SystemExit(f"probe failed for {bad}")
    return took


def _run(base: Path, name: str, hosts: str, scenario: Path, env: dict) -> tuple[float, float]:
    db = base / f"{name}.sqlite"
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "iorig", "--db", str(db), "run", str(scenario), "--hosts", hosts],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    took = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"{name} run failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    show = subprocess.run(
        [sys.executable, "-m", "iorig", "--db", str(db), "show", "last", "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    phase = next(p for p in json.loads(show.stdout)["phases"] if p["name"] == "random-read")
    return float(phase["iops"]), took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--rate", type=int, default=200, help="IOPS per host")
    parser.add_argument("--duration", type=int, default=6)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="iorig-bench-ssh-"))
    scenario = base / "paced.yaml"
    scenario.write_text(paced_scenario(args.rate, duration=f"{args.duration}s", iodepth=1))
    expected = args.hosts * args.rate
    try:
        with (
            ssh_hosts(args.hosts, base) as lab,
            token_agents(args.hosts, base) as agents,
            fio_servers(args.hosts, base) as direct,
        ):
            env = dict(os.environ, **{ssh.CONFIG_ENV: str(lab.config)}, **agents.env)
            os.environ.update({ssh.CONFIG_ENV: str(lab.config)}, **agents.env)
            began = time.monotonic()
            workdir, connections = ssh.connect_all(lab.hosts)
            connect_s = time.monotonic() - began
            try:
                ssh_probe_s = _probe([c.endpoint for c in connections.values()])
            finally:
                ssh.close_all(workdir, connections)
            began = time.monotonic()
            links = tlsrelay.connect_agents(agents.hosts)
            tls_connect_s = time.monotonic() - began
            try:
                tls_probe_s = _probe([links.endpoint(h) for h in agents.hosts])
            finally:
                links.close()
            direct_probe_s = _probe(direct)
            print(f"{args.hosts} hosts, setup:")
            print(
                f"  SSH: connect {connect_s:.2f} s + probe {ssh_probe_s:.2f} s = "
                f"{connect_s + ssh_probe_s:.2f} s (target < 10 s)"
            )
            print(
                f"  TLS agents: connect {tls_connect_s:.2f} s + probe {tls_probe_s:.2f} s = "
                f"{tls_connect_s + tls_probe_s:.2f} s (target < 10 s)"
            )
            print(f"  direct fio servers: probe {direct_probe_s:.2f} s")
            ways = {
                "SSH": ",".join(h.label for h in lab.hosts),
                "TLS": agents.hosts_arg,
                "direct": ",".join(h.label for h in direct),
            }
            figures = {way: _run(base, way, hosts, scenario, env) for way, hosts in ways.items()}
            plain, direct_wall = figures["direct"]
            print(f"paced run, {args.hosts} × {args.rate} IOPS = {expected} expected:")
            for way, (iops, wall) in figures.items():
                print(
                    f"  {way + ':':7} {iops:8.0f} IOPS ({iops / expected:.3f} of expected), "
                    f"run {wall:.1f} s; against direct: IOPS {iops / plain:.3f}, "
                    f"wall time {wall / direct_wall:.2f}"
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

"""A fake fio server that answers fio's probe, for testing the version check
without a second fio build.

It listens on a loopback port in a background thread and, per connection:

- ``answer``: replies to a probe like a real server: in its own protocol
  version with its ``fio_version``; a probe in another protocol gets what a
  real fio 3.33 server sends, one TEXT message in its own protocol ("fio: bad
  server cmd version N"), and the connection is closed;
- ``drop``: closes the connection without a word;
- ``silent``: accepts and never answers (a hung or blackholed server);
- ``garbage``: answers with something that is not fio's protocol.

    with FakeFioServer(("127.0.0.2", 18750), fio_version="fio-3.99") as fake:
        ... probe HostAddress(*fake.address) ...
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from iorig.fio.protocol import encode_command

Behaviour = Literal["answer", "drop", "silent", "garbage"]

_HEADER = struct.Struct("<HHIQIHH")
_CMD_TEXT = 5
_CMD_PROBE = 10
_OS_LINUX, _ARCH_X86_64 = 1, 1


@dataclass
class FakeFioServer:
    address: tuple[str, int]
    fio_version: str = "fio-3.33"
    protocol: int = 97
    behaviour: Behaviour = "answer"
    hostname: str = "fakehost"
    cpus: int = 4
    seen_versions: list[int] = field(default_factory=list)  # header versions of probes

    def __post_init__(self) -> None:
        family = socket.AF_INET6 if ":" in self.address[0] else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []

    def start(self) -> FakeFioServer:
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(self.address)
        self._listener.listen(8)
        self._listener.settimeout(0.1)
        self._spawn(self._accept_loop)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        for conn in self._conns:
            conn.close()
        self._listener.close()

    def __enter__(self) -> FakeFioServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._conns.append(conn)
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        if self.behaviour == "drop":
            conn.close()
            return
        if self.behaviour == "silent":
            self._stop.wait()  # keep the connection open, say nothing
            return
        conn.settimeout(5)
        with contextlib.suppress(OSError), conn:
            head = _recv(conn, _HEADER.size)
            version, opcode, _, tag, pdu_len, _, _ = _HEADER.unpack(head)
            _recv(conn, pdu_len)
            self.seen_versions.append(version)
            if self.behaviour == "garbage":
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 2)
            elif version != self.protocol:
                text = f"fio: bad server cmd version {version}\n".encode()
                pdu = struct.pack("<IIQQ", 3, len(text), int(time.time()), 0) + text
                conn.sendall(encode_command(_CMD_TEXT, pdu, version=self.protocol))
            elif opcode == _CMD_PROBE:
                conn.sendall(
                    encode_command(_CMD_PROBE, self._probe_reply(), version=version, tag=tag)
                )
                time.sleep(0.2)  # a real fio client goes on to send its job; ignore it

    def _probe_reply(self) -> bytes:
        return struct.pack(
            "<64sB32sBBBIQ",
            self.hostname.encode(),
            0,
            self.fio_version.encode(),
            _OS_LINUX,
            _ARCH_X86_64,
            8,
            self.cpus,
            0,
        )


def _recv(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data

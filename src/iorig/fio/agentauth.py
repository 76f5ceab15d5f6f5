"""Who may use an ``iorig agent``: its token or certificates, the TLS
contexts of both ends, and the handshake that proves the token.

After TLS, one line each way (ASCII, at most ``MAX_LINE`` bytes)::

    agent  -> IORIG-AGENT-AUTH 1 TOKEN <agent nonce>   (mutual TLS: ... CERT -)
    driver -> <driver nonce> <driver proof> <channel>  (mutual TLS: - - <channel>)
    agent  -> OK <agent proof>                         (mutual TLS: OK -)

then the channel's own bytes: ``FIO`` (to and from the agent's fio
server) or ``CONTROL`` (fio.control's requests). A proof is
HMAC-SHA256(token, role, both nonces, the channel and the SHA-256 of the
agent's TLS certificate). The certificate's hash binds the proof to this
TLS channel (RFC 5929's tls-server-end-point): whoever sits in the middle
presents a certificate of their own, so a proof relayed through them
fails. The agent's fresh nonce makes a replayed proof fail; the agent's
proof tells the driver it reached an agent that knows the token. With
mutual TLS the certificates authenticate both ends and the lines only
name the channel. See docs/guide/hosts.md.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime
import hashlib
import hmac
import os
import secrets
import ssl
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from iorig.errors import UserError
from iorig.untrusted import read_input

MAGIC = "IORIG-AGENT-AUTH 1"
MAX_LINE = 200
CHANNELS = ("FIO", "CONTROL")
TOKEN_HEADER = "iorig-agent-token 1"
TOKEN_BYTES = 32
TOKEN_ENV = "IORIG_AGENT_TOKEN_FILE"
CERT_ENV = ("IORIG_AGENT_CERT", "IORIG_AGENT_KEY", "IORIG_AGENT_CA")
_NONCE_HEX = 32
CLOSED = "the agent closed the connection: it refused this machine's token or certificate"


def default_token_path() -> Path:
    return Path.home() / ".config" / "iorig" / "agent.token"


@dataclass(frozen=True)
class TokenAuth:
    """A shared token (``iorig agent token``), read from ``source``."""

    token: bytes = field(repr=False)
    source: str


@dataclass(frozen=True)
class CertAuth:
    """Mutual TLS: this end's certificate and key, and the authority whose
    certificates the other end must show."""

    cert: Path
    key: Path
    ca: Path


Auth = TokenAuth | CertAuth


class AuthRefused(Exception):
    """A handshake that failed; the message says why (for the agent's log)."""


# ------------------------------------------------------------ the token file


def write_token(path: Path, *, force: bool = False) -> None:
    """A new random token in ``path``, readable by its owner only (0600),
    in a directory made 0700 if it did not exist. An existing file is kept
    unless ``force``: its agents would stop accepting this machine."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = base64.urlsafe_b64encode(secrets.token_bytes(TOKEN_BYTES)).decode().rstrip("=")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    if force:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise UserError(
            f"{path} exists already: its agents accept the token in it",
            hint="pass --force to replace it (then copy the new one to every agent)",
        ) from None
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(f"{TOKEN_HEADER} {token}\n")


def read_token(path: Path) -> TokenAuth:
    """The token in ``path``; UserError naming the file when it is missing,
    malformed, not a plain file, or readable by anyone but its owner."""
    try:
        # O_NONBLOCK: a FIFO in the token's place does not hang the open (refused below)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise UserError(
            f"no agent token at {path}",
            hint="make one with `iorig agent token` and give the agents the same file "
            f"(`iorig agent --token-file`); elsewhere, set {TOKEN_ENV}",
        ) from None
    except OSError as exc:
        raise UserError(f"cannot read the agent token {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"the agent token {path} is not a plain file")
        if info.st_mode & 0o077:
            raise UserError(
                f"the agent token {path} may be read by other users "
                f"(mode {stat.S_IMODE(info.st_mode):04o}): anyone who reads it may run jobs "
                "on the agents",
                hint=f"chmod 600 {path}",
            )
        if info.st_uid not in (os.geteuid(), 0):  # as ssh's StrictModes
            raise UserError(
                f"the agent token {path} belongs to another user (uid {info.st_uid})",
                hint="use a token file of your own (`iorig agent token`)",
            )
        text = f.read(256).decode("ascii", "replace").strip()
    head, _, value = text.rpartition(" ")
    try:
        token = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        token = b""
    if head != TOKEN_HEADER or len(token) != TOKEN_BYTES:
        raise UserError(
            f"{path} is not an iorig agent token",
            hint="make one with `iorig agent token`",
        )
    return TokenAuth(token, str(path))


def cert_auth(cert: Path | None, key: Path | None, ca: Path | None, *, what: str) -> CertAuth:
    """Mutual TLS from three files, all given and readable."""
    given = {"certificate": cert, "key": key, "authority": ca}
    missing = [name for name, value in given.items() if value is None]
    if missing:
        raise UserError(
            f"mutual TLS needs a certificate, its key and the authority that signed the "
            f"other end's certificates: {', '.join(missing)} missing",
            hint=what,
        )
    assert cert is not None and key is not None and ca is not None
    for path in (cert, key, ca):
        if not path.is_file():
            raise UserError(f"{path}: no such file", hint=what)
    return CertAuth(cert, key, ca)


def driver_auth() -> Auth:
    """How this machine proves itself to agents (``tls://`` hosts):
    mutual TLS when IORIG_AGENT_CERT, IORIG_AGENT_KEY and IORIG_AGENT_CA
    are set, else the token in IORIG_AGENT_TOKEN_FILE or
    ~/.config/iorig/agent.token."""
    if any(os.environ.get(name) for name in CERT_ENV):
        cert, key, ca = (Path(os.environ[n]) if os.environ.get(n) else None for n in CERT_ENV)
        return cert_auth(cert, key, ca, what="set " + ", ".join(CERT_ENV))
    return read_token(Path(os.environ.get(TOKEN_ENV) or default_token_path()))


# ------------------------------------------------------------ TLS


def _new_certificate() -> tuple[bytes, bytes]:
    """A self-signed certificate and key (PEM) for this agent process: the
    token authenticates, the certificate only binds the proofs to the channel."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "iorig-agent")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _first_certificate_hash(pem: str) -> bytes:
    begin = pem.find("-----BEGIN CERTIFICATE-----")
    end = pem.find("-----END CERTIFICATE-----", begin)
    if begin < 0 or end < 0:
        raise ValueError("no certificate")
    der = ssl.PEM_cert_to_DER_cert(pem[begin : end + len("-----END CERTIFICATE-----")])
    return hashlib.sha256(der).digest()


def _load_chain(context: ssl.SSLContext, cert: Path, key: Path) -> None:
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise UserError(
            f"cannot use the certificate {cert} with the key {key}: {exc}",
            hint="both in PEM form, the key matching the certificate and not encrypted",
        ) from None


def _load_authority(context: ssl.SSLContext, ca: Path) -> None:
    try:
        context.load_verify_locations(cafile=str(ca))
    except (ssl.SSLError, OSError) as exc:
        raise UserError(f"cannot use {ca} as a certificate authority: {exc}") from None


def _context(purpose: int) -> ssl.SSLContext:
    context = ssl.SSLContext(purpose)
    context.minimum_version = ssl.TLSVersion.TLSv1_3  # both ends are iorig
    return context


def agent_context(auth: Auth) -> tuple[ssl.SSLContext, bytes]:
    """The agent's TLS context and the SHA-256 of its certificate."""
    context = _context(ssl.PROTOCOL_TLS_SERVER)
    if isinstance(auth, CertAuth):
        _load_chain(context, auth.cert, auth.key)
        _load_authority(context, auth.ca)
        context.verify_mode = ssl.CERT_REQUIRED  # no certificate, no connection
        try:
            binding = _first_certificate_hash(read_input(auth.cert, "certificate"))
        except ValueError:
            raise UserError(f"{auth.cert} holds no PEM certificate") from None
        return context, binding
    cert_pem, key_pem = _new_certificate()
    with tempfile.TemporaryDirectory(prefix="iorig-agent-tls-") as tmp:  # 0700, removed at once
        cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        context.load_cert_chain(cert, key)
    return context, _first_certificate_hash(cert_pem.decode())


def driver_context(auth: Auth) -> ssl.SSLContext:
    """The driver's TLS context. With a token the agent's certificate is
    not checked against an authority: the agent's proof, bound to that
    certificate, is what shows it knows the token."""
    context = _context(ssl.PROTOCOL_TLS_CLIENT)
    if isinstance(auth, CertAuth):
        _load_chain(context, auth.cert, auth.key)
        _load_authority(context, auth.ca)
        return context  # check_hostname and CERT_REQUIRED: the client's defaults
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def certificate_hash(der: bytes | None) -> bytes:
    if not der:
        raise AuthRefused("the agent showed no certificate")
    return hashlib.sha256(der).digest()


# ------------------------------------------------------------ the handshake


def nonce() -> str:
    return secrets.token_hex(_NONCE_HEX // 2)


def _proof(
    auth: TokenAuth, role: str, agent_nonce: str, driver_nonce: str, channel: str, binding: bytes
) -> str:
    message = "\n".join((MAGIC, role, agent_nonce, driver_nonce, channel)).encode() + binding
    return hmac.new(auth.token, message, hashlib.sha256).hexdigest()


def _is_nonce(text: str) -> bool:
    return len(text) == _NONCE_HEX and all(c in "0123456789abcdef" for c in text)


def agent_hello(auth: Auth, agent_nonce: str) -> bytes:
    if isinstance(auth, CertAuth):
        return f"{MAGIC} CERT -\n".encode()
    return f"{MAGIC} TOKEN {agent_nonce}\n".encode()


def driver_answer(auth: Auth, hello: str, channel: str, binding: bytes) -> tuple[bytes, str]:
    """The driver's line for the agent's ``hello``, and the agent proof to
    expect back."""
    if not hello:  # TLS 1.3: a certificate the agent refused shows here
        raise AuthRefused(CLOSED)
    words = hello.removeprefix(MAGIC).split() if hello.startswith(MAGIC + " ") else []
    if isinstance(auth, CertAuth):
        if words != ["CERT", "-"]:
            raise AuthRefused(f"the agent does not ask for certificates: {hello[:60]!r}")
        return f"- - {channel}\n".encode(), "-"
    if len(words) != 2 or words[0] != "TOKEN" or not _is_nonce(words[1]):
        raise AuthRefused(f"not an iorig agent asking for a token: {hello[:60]!r}")
    mine = nonce()
    proof = _proof(auth, "driver", words[1], mine, channel, binding)
    expected = _proof(auth, "agent", words[1], mine, channel, binding)
    return f"{mine} {proof} {channel}\n".encode(), expected


def agent_check(auth: Auth, agent_nonce: str, line: str, binding: bytes) -> tuple[str, bytes]:
    """The channel the driver asked for and the agent's answer; AuthRefused
    for anything but a proof made with the token for this nonce and channel."""
    words = line.split()
    if len(words) != 3 or words[2] not in CHANNELS:
        raise AuthRefused("a garbled handshake")
    driver_nonce, proof, channel = words
    if isinstance(auth, CertAuth):
        return channel, b"OK -\n"
    if not _is_nonce(driver_nonce):
        raise AuthRefused("a garbled handshake")
    expected = _proof(auth, "driver", agent_nonce, driver_nonce, channel, binding)
    if not hmac.compare_digest(proof.encode(), expected.encode()):
        raise AuthRefused("a wrong token (or a proof made for another connection)")
    answer = _proof(auth, "agent", agent_nonce, driver_nonce, channel, binding)
    return channel, f"OK {answer}\n".encode()


def driver_check(answer: str, expected: str) -> None:
    """The agent's answer carries the proof the driver expects."""
    if not answer:
        raise AuthRefused(CLOSED)
    words = answer.split()
    proof = words[1] if len(words) == 2 and words[0] == "OK" else ""
    if not hmac.compare_digest(proof.encode(), expected.encode()):
        raise AuthRefused("the agent's answer does not prove it knows the token")

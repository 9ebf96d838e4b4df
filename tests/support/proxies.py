"""What stands between argus and a dashboard in real deployments, on loopback, for tests: a private CA and
its certificates, a reverse proxy (TLS-terminating, under a path prefix, stripping headers) that forwards
both HTTP and the log websocket to a real dashboard, and a forward HTTP proxy (CONNECT and plain
forwarding). Each records what reached it: tests assert what travelled, not only what argus printed."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer",
              "host", "content-length", "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions"}


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_pki(directory: Path) -> Pki:
    """A private CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    directory.mkdir(parents=True, exist_ok=True)

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    def issue(subject: str, key: Any, issuer: x509.Name, signer: Any, ca: bool, extra: list) -> x509.Certificate:
        builder = (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(issuer)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        for extension in extra:
            builder = builder.add_extension(extension, critical=False)
        return builder.sign(signer, hashes.SHA256())

    def save(stem: str, cert: x509.Certificate, key: Any) -> tuple[Path, Path]:
        (directory / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (directory / f"{stem}.key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        return directory / f"{stem}.pem", directory / f"{stem}.key"

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = issue("argus test CA", ca_key, name("argus test CA"), ca_key, True,
                    [x509.KeyUsage(False, False, False, False, False, True, True, False, False)])
    server_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    server = issue("127.0.0.1", server_key, ca_cert.subject, ca_key, False, [
        x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH])])
    client = issue("argus", client_key, ca_cert.subject, ca_key, False,
                   [x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])])
    ca, _ = save("ca", ca_cert, ca_key)
    server_cert, server_key_file = save("server", server, server_key)
    client_cert, client_key_file = save("client", client, client_key)
    return Pki(ca, server_cert, server_key_file, client_cert, client_key_file)


@dataclass
class Seen:
    """One request that reached a proxy: its method, path (or target) and headers."""

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)


class _Loop:
    """An asyncio loop on a thread of its own, so that servers run while the test calls argus in-process."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(30)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@contextlib.contextmanager
def reverse_proxy(upstream: str, prefix: str = "/", tls: Pki | None = None, strip: tuple[str, ...] = (),
                  require_client_cert: bool = False) -> Iterator[tuple[str, list[Seen]]]:
    """A reverse proxy to the dashboard at `upstream`, serving it under `prefix`: its address and what it saw."""
    from aiohttp import ClientSession, WSMsgType, WSServerHandshakeError, web

    seen: list[Seen] = []
    dropped = {name.lower() for name in strip}

    async def forward(request: web.Request) -> web.StreamResponse:
        seen.append(Seen(request.method, request.path_qs, dict(request.headers)))
        if not request.path.startswith(prefix):
            return web.Response(status=404, text=f"not under {prefix}")
        target = upstream.rstrip("/") + "/" + request.path_qs[len(prefix):]
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP | dropped}
        async with ClientSession(auto_decompress=False) as session:
            if request.headers.get("Upgrade", "").lower() == "websocket":
                try:
                    upstream_ws = await session.ws_connect(target, headers=headers)
                except WSServerHandshakeError as err:
                    return web.Response(status=err.status, text=err.message)
                client_ws = web.WebSocketResponse()
                await client_ws.prepare(request)
                async for message in upstream_ws:
                    if message.type == WSMsgType.TEXT:
                        await client_ws.send_str(message.data)
                await client_ws.close(code=upstream_ws.close_code or 1000)
                return client_ws
            async with session.request(request.method, target, headers=headers, data=await request.read(),
                                       allow_redirects=False) as answer:
                body = await answer.read()
                kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
                return web.Response(status=answer.status, body=body, headers=kept)

    loop = _Loop()
    context = None
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls.server_cert, tls.server_key)
        if require_client_cert:
            context.load_verify_locations(tls.ca)
            context.verify_mode = ssl.CERT_REQUIRED

    async def start() -> tuple[web.AppRunner, int]:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", forward)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    runner, port = loop.run(start())
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}{prefix}", seen
    finally:
        loop.run(runner.cleanup())
        loop.stop()


@contextlib.contextmanager
def forward_proxy() -> Iterator[tuple[str, list[Seen]]]:
    """An HTTP proxy (CONNECT tunnels, and plain forwarding of absolute-URI requests, websocket upgrades
    included): its URL, and the request line of every connection made through it."""
    seen: list[Seen] = []

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(OSError):
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        line, _, rest = head.partition(b"\r\n")
        method, target, version = line.decode("latin-1").split(" ", 2)
        fields = [field.split(":", 1) for field in rest.decode("latin-1").split("\r\n") if ":" in field]
        seen.append(Seen(method, target, {name.strip(): value.strip() for name, value in fields}))
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            hostport, _, path = target.split("://", 1)[1].partition("/")
            host, _, port = hostport.partition(":")
            up_reader, up_writer = await asyncio.open_connection(host, int(port or 80))
            up_writer.write(f"{method} /{path} {version}\r\n".encode("latin-1") + rest)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    loop = _Loop()

    async def start() -> asyncio.AbstractServer:
        return await asyncio.start_server(handle, "127.0.0.1", 0)

    server = loop.run(start())
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", seen
    finally:
        server.close()
        loop.stop()

"""A real git server over HTTPS on loopback for tests: `git http-backend` behind a TLS http.server
that demands HTTP Basic auth and records every Authorization header it is sent.

The certificate is self-signed for 127.0.0.1 and localhost; git trusts it through GIT_SSL_CAINFO.
"""

from __future__ import annotations

import base64
import os
import ssl
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def make_certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


@dataclass
class GitHttps:
    """Serves the bare repositories under `root` at https://127.0.0.1:<port>/<name>.git."""

    root: Path
    user: str
    token: str
    redirect_to: str | None = None
    """When set, every request is answered with a redirect there instead."""
    seen: list[str | None] = field(default_factory=list)
    """The Authorization header of each request, None when absent."""
    port: int = 0

    @property
    def expected(self) -> str:
        return "Basic " + base64.b64encode(f"{self.user}:{self.token}".encode()).decode()

    def url(self, name: str, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}/{name}"


def serve(server: GitHttps, cert: Path, key: Path) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; the caller shuts the returned server down."""
    handler = type("Handler", (_Handler,), {"git": server})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    server.port = httpd.server_address[1]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


class _Handler(BaseHTTPRequestHandler):
    git: GitHttps

    def log_message(self, *_args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer(b"")

    def do_POST(self) -> None:  # noqa: N802
        self._answer(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def _answer(self, body: bytes) -> None:
        self.git.seen.append(self.headers.get("Authorization"))
        if self.git.redirect_to is not None:
            self.send_response(302)
            self.send_header("Location", self.git.redirect_to + self.path)
            self.end_headers()
            return
        if self.headers.get("Authorization") != self.git.expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.end_headers()
            return
        self._backend(body)

    def _backend(self, body: bytes) -> None:
        path, _, query = self.path.partition("?")
        env = {"PATH": os.environ["PATH"], "GIT_PROJECT_ROOT": str(self.git.root), "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": self.command, "REMOTE_USER": "tester",
               "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
               "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""), "HOME": str(self.git.root)}
        done = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, check=False)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        headers = [line.split(b":", 1) for line in head.split(b"\r\n") if b":" in line]
        status = next((int(v.split()[0]) for k, v in headers if k.lower() == b"status"), 200)
        self.send_response(status)
        for name, value in headers:
            if name.lower() != b"status":
                self.send_header(name.decode(), value.strip().decode())
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

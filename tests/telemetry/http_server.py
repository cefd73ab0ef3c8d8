"""A scripted JSON/text server on 127.0.0.1 for the Redfish, Prometheus and sim tests.

Routes map a path (query string ignored) to a callable returning ``(status, body)``; a dict
body is sent as JSON, a str as text. Optional HTTP basic auth, optional TLS with a
self-signed certificate made at test time (``cryptography``), and a ``hang`` set of paths
that never answer until the server stops (to test client timeouts without sleeping).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

Route = Callable[[dict[str, list[str]]], tuple[int, Any]]


def make_self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bmc.test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class ScriptedServer:
    """Serve ``routes`` on 127.0.0.1 in a background thread; use as a context manager."""

    def __init__(
        self,
        routes: dict[str, Route],
        *,
        auth: tuple[str, str] | None = None,
        tls: tuple[Path, Path] | None = None,
        hang: set[str] | None = None,
    ) -> None:
        self.routes = routes
        self.hang = hang or set()
        self.requests: list[str] = []
        self.auth_headers: list[str | None] = []
        self._release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                server.requests.append(parts.path)
                header = self.headers.get("Authorization")
                server.auth_headers.append(header)
                if parts.path in server.hang:
                    server._release.wait(30)
                    return
                if auth is not None:
                    token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
                    if header != f"Basic {token}":
                        self._send(401, {"error": {"code": "Base.1.0.NoValidSession"}})
                        return
                route = server.routes.get(parts.path)
                if route is None:
                    self._send(404, {"error": "not found"})
                    return
                status, body = route(parse_qs(parts.query))
                self._send(status, body)

            def _send(self, status: int, body: Any) -> None:
                data = body if isinstance(body, str) else json.dumps(body)
                raw = data.encode()
                self.send_response(status)
                ctype = "text/plain; version=0.0.4" if isinstance(body, str) else "application/json"
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        scheme = "http"
        if tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(tls[0]), str(tls[1]))
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join()


def fixed(body: Any, status: int = 200) -> Route:
    """A route that always answers the same body."""
    return lambda _query: (status, body)

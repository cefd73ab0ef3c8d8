"""A scripted JSON/text HTTP server on 127.0.0.1 for the synchronous clients' tests (engine
probes, Redfish, Prometheus), on pytest-httpserver's server (werkzeug, threaded).

Routes map a path (query string ignored) to a callable of the parsed query returning
``(status, body)``; a dict or list body is sent as JSON, a str as Prometheus text. Optional
HTTP basic auth or a bearer token, optional TLS with a self-signed certificate made at test
time (``cryptography``), and a ``hang`` set of paths that do not answer until the server
stops (to test client timeouts without sleeping).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import re
import ssl
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

Route = Callable[[dict[str, list[str]]], tuple[int, Any]]

PROMETHEUS_TEXT = "text/plain; version=0.0.4"


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
    """Serve ``routes`` on 127.0.0.1 in a background thread; use as a context manager.

    ``requests`` lists the paths asked for and ``auth_headers`` the Authorization headers
    sent, in order. With ``auth`` (user, password) a request without those basic-auth
    credentials gets 401; with ``bearer`` one without ``Bearer TOKEN`` does.
    """

    def __init__(
        self,
        routes: dict[str, Route],
        *,
        auth: tuple[str, str] | None = None,
        bearer: str | None = None,
        tls: tuple[Path, Path] | None = None,
        hang: set[str] | None = None,
    ) -> None:
        self.routes = routes
        self.hang = hang or set()
        self.requests: list[str] = []
        self.auth_headers: list[str | None] = []
        self._release = threading.Event()
        self._expected: str | None = None
        if auth is not None:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            self._expected = f"Basic {token}"
        elif bearer is not None:
            self._expected = f"Bearer {bearer}"
        context: ssl.SSLContext | None = None
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
        # Threaded, so that a hanging path does not hold up the others.
        self._server = HTTPServer(host="127.0.0.1", port=0, ssl_context=context, threaded=True)
        self._server.expect_request(re.compile(".*")).respond_with_handler(self._handle)
        self._scheme = "https" if tls is not None else "http"
        self.url = ""

    def _handle(self, request: Request) -> Response:
        self.requests.append(request.path)
        header = request.headers.get("Authorization")
        self.auth_headers.append(header)
        if request.path in self.hang:
            self._release.wait(30)
            return Response(status=504)  # the client gave up long before
        if self._expected is not None and header != self._expected:
            return _reply(401, {"error": "unauthorized"})
        route = self.routes.get(request.path)
        if route is None:
            return _reply(404, {"detail": "Not Found"})
        status, body = route(parse_qs(request.query_string.decode()))
        return _reply(status, body)

    def __enter__(self) -> ScriptedServer:
        self._server.start()
        self.url = f"{self._scheme}://127.0.0.1:{self._server.port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._server.stop()


def _reply(status: int, body: Any) -> Response:
    if isinstance(body, str):
        return Response(body, status=status, content_type=PROMETHEUS_TEXT)
    return Response(json.dumps(body), status=status, content_type="application/json")


def fixed(body: Any, status: int = 200) -> Route:
    """A route that always answers the same body."""
    return lambda _query: (status, body)

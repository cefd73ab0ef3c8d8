"""One network path per URL: whether a connection goes through a proxy from the environment.

Every client of the tool (the probes, ``/metrics``, the load, the accuracy suite, the power
readers) asks :func:`network_path` and connects the way it says, so that they all take the
same path. Left to themselves they would not: httpx reads ``HTTP_PROXY``/``HTTPS_PROXY`` from
the environment by default, aiohttp does not, so a proxy variable set for the office network
sent the probes of a server on 127.0.0.1 to the proxy ("connection refused") while the load
went direct.

The rule (``engine.proxy`` in the spec):

* ``auto`` (the default): the environment's proxy for the URL's scheme (``http_proxy``,
  ``HTTPS_PROXY``, ``all_proxy``, as :func:`urllib.request.getproxies_environment` reads them,
  honouring ``no_proxy``), except for a loopback or link-local host (``localhost``,
  ``127.0.0.0/8``, ``::1``, ``169.254.0.0/16``, ``fe80::/10``), which a proxy elsewhere cannot
  reach as the same machine: those always go direct. This is the rule curl and Go's
  ``net/http`` apply to loopback names.
* ``environment``: the environment's proxy for every host, loopback included (``no_proxy``
  still applies).
* ``off``: always direct.

The host is not resolved (no DNS lookup decides the path), so a name that resolves to a
loopback address is treated as any other name.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tokenwatt.errors import InputError, Problem

ProxyChoice = Literal["auto", "environment", "off"]
"""How the spec lets the environment's proxy apply (``engine.proxy``); see the module."""

_LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


def is_local_host(host: str) -> bool:
    """Whether ``host`` (a name or an IP literal, brackets allowed) is loopback or link-local.

    ``localhost`` and any ``*.localhost`` name count as loopback (RFC 6761, section 6.3).
    """
    name = host.strip("[]").lower().rstrip(".")
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    addr = _ip_literal(name.split("%", 1)[0])
    if addr is None:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped  # ::ffff:127.0.0.1
    # The unspecified address (0.0.0.0, ::) reaches this machine when connected to.
    return addr.is_loopback or addr.is_link_local or addr.is_unspecified


def _ip_literal(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``name`` as an IP address, IPv4 in every spelling the C library's ``inet_aton``
    takes (``127.1``, ``2130706433``, ``0x7f.1``), which is how the connection reads it."""
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        pass
    parts = name.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    try:
        numbers = [
            int(p, 16) if p.startswith("0x") else int(p, 8 if p[:1] == "0" and p != "0" else 10)
            for p in parts
        ]
    except ValueError:
        return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    value = sum(n << (8 * (3 - i)) for i, n in enumerate(head)) + last
    return ipaddress.IPv4Address(value)


@dataclass(frozen=True)
class NetworkPath:
    """How to reach one URL: direct, or through a proxy the environment names.

    Attributes:
        proxy_url: the proxy's URL as the environment gives it (credentials included, for
            connecting: left out of ``repr`` and of every text this class makes); None: direct.
        source: the environment variable the proxy came from (e.g. ``HTTPS_PROXY``); None
            when direct.
        why_direct: why a proxy the environment names was not used (a loopback host, the
            spec's ``off``, ``no_proxy``); None when no proxy variable applied or one is used.
    """

    proxy_url: str | None = field(default=None, repr=False)
    source: str | None = None
    why_direct: str | None = None

    @property
    def shown(self) -> str | None:
        """The proxy's URL without user name or password, for records and messages."""
        if self.proxy_url is None:
            return None
        parts = urllib.parse.urlsplit(self.proxy_url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host + (f":{parts.port}" if parts.port else "")
        # No path, query or user info: a proxy needs none, and a token could sit there.
        return urllib.parse.urlunsplit((parts.scheme, netloc, "", "", ""))

    @property
    def described(self) -> str | None:
        """The proxy in words for the run record (``'http://proxy:3128 (from HTTPS_PROXY)'``);
        None when the path is direct."""
        if self.proxy_url is None:
            return None
        return f"{self.shown} (from {self.source})"

    @property
    def error_note(self) -> str:
        """What a connection error's message adds: the proxy it went through and how to go
        direct; empty when direct."""
        if self.proxy_url is None:
            return ""
        return (
            f' (through the proxy {self.described}; set engine.proxy: "off" in the spec, '
            "or no_proxy, to connect directly)"
        )

    @property
    def secrets(self) -> list[str]:
        """The proxy's password, if its URL has one: a value no record or message may hold."""
        if self.proxy_url is None:
            return []
        password = urllib.parse.urlsplit(self.proxy_url).password
        return [urllib.parse.unquote(password)] if password else []

    def httpx_options(self, verify: bool = True) -> dict[str, Any]:
        """Keyword arguments for ``httpx.Client``/``AsyncClient`` that take this path.

        httpx's own reading of the environment is off (``trust_env=False``): it would build
        a transport for every proxy variable, a SOCKS one included (which needs an extra it
        may not have), before any override applied. What ``trust_env`` also gave, the
        environment's CA bundle (``SSL_CERT_FILE``, ``SSL_CERT_DIR``), is kept
        (:func:`_tls_verify`). ``verify``: check the server's TLS certificate.
        """
        return {"trust_env": False, "proxy": self.proxy_url, "verify": _tls_verify(verify)}


def _tls_verify(verify: bool) -> bool | ssl.SSLContext:
    """``verify`` for httpx: False, True (httpx's certifi bundle), or, where the environment
    names a CA bundle (``SSL_CERT_FILE`` or ``SSL_CERT_DIR``, as OpenSSL and httpx's
    ``trust_env`` read them), a context that trusts it."""
    if not verify:
        return False
    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    if cafile is None and capath is None:
        return True
    return ssl.create_default_context(cafile=cafile, capath=capath)


def _env_proxy(scheme: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """The proxy the environment names for ``scheme`` and the variable it came from.

    Lower-case names win over upper-case ones, and ``<scheme>_proxy`` over ``all_proxy``, as
    :func:`urllib.request.getproxies_environment` and curl read them.
    """
    for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY", "all_proxy", "ALL_PROXY"):
        value = env.get(name, "").strip()
        if value:
            if "://" not in value:
                value = "http://" + value
            return value, name
    return None


def _bypassed(host: str, env: Mapping[str, str]) -> bool:
    """Whether ``no_proxy``/``NO_PROXY`` in ``env`` exempts ``host``."""
    no_proxy = env.get("no_proxy", "").strip() or env.get("NO_PROXY", "")
    if not no_proxy.strip():
        return False
    # The standard library's reading of no_proxy (suffixes, leading dots, ports, '*'), which
    # typeshed leaves out although urllib exports it.
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    return bool(bypass(host, {"no": no_proxy}))


def network_path(
    url: str, choice: ProxyChoice = "auto", environ: Mapping[str, str] | None = None
) -> NetworkPath:
    """The path to ``url``: direct, or through the environment's proxy (see the module).

    Args:
        url: the URL to be reached (``http://`` or ``https://``).
        choice: the spec's ``engine.proxy``.
        environ: the environment to read; by default ``os.environ``.

    Raises:
        InputError: the proxy that applies is not an HTTP(S) proxy (``socks5://`` …), named
            by its variable.
    """
    env = os.environ if environ is None else environ
    parts = urllib.parse.urlsplit(url)
    found = _env_proxy(parts.scheme.lower() or "http", env)
    if found is None:
        return NetworkPath()
    proxy_url, source = found
    host = parts.hostname or ""
    if choice == "off":
        return NetworkPath(why_direct=f"{source} is set, but engine.proxy is off")
    if _bypassed(host, env):
        return NetworkPath(why_direct=f"{source} is set, but no_proxy exempts {host}")
    if choice == "auto" and is_local_host(host):
        return NetworkPath(
            why_direct=f"{source} is set, but {host} is a loopback or link-local host"
        )
    try:
        proxy_parts = urllib.parse.urlsplit(proxy_url)
        _ = proxy_parts.port  # raises for a port that is no number or out of range
    except ValueError:
        message = "is not a proxy URL (http://HOST:PORT) that can be read; its value is not shown"
        raise InputError([Problem(source, "", message)]) from None
    scheme = proxy_parts.scheme.lower()
    if not proxy_parts.hostname:
        raise InputError([Problem(source, "", "names a proxy without a host")])
    if scheme not in ("http", "https"):
        raise InputError(
            [
                Problem(
                    source,
                    "",
                    f"is a {scheme} proxy, which the load generator (aiohttp) cannot use for "
                    f"{host}: give an http:// proxy, exempt the host in no_proxy, or set "
                    'engine.proxy: "off" in the spec',
                )
            ]
        )
    return NetworkPath(proxy_url=proxy_url, source=source)


__all__ = ["NetworkPath", "ProxyChoice", "is_local_host", "network_path"]

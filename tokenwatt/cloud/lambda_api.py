"""Lambda Cloud's public API (``https://cloud.lambda.ai/api/v1``) over httpx.

Endpoints used (Lambda's Cloud API reference, docs-api.lambda.ai/api/cloud, and its
"Cloud API" guide):

* ``GET /instance-types``: ``{"data": {NAME: {"instance_type": {"name", "description",
  "gpu_description", "price_cents_per_hour", "specs": {"gpus", ...}},
  "regions_with_capacity_available": [{"name", "description"}]}}}``;
* ``POST /instance-operations/launch`` with ``region_name``, ``instance_type_name``,
  ``ssh_key_names`` (exactly one), ``quantity`` and ``name``: ``{"data": {"instance_ids":
  [...]}}``;
* ``GET /instances`` (``{"data": [Instance]}``) and ``GET /instances/{id}`` (``{"data":
  Instance}``), an instance having ``id``, ``name``, ``status`` (booting, active,
  unhealthy, terminating, terminated), ``ip``, ``region.name``, ``instance_type.name``;
* ``POST /instance-operations/terminate`` with ``instance_ids``;
* ``GET /ssh-keys`` and ``POST /ssh-keys`` with ``name`` and ``public_key``.

Authentication is HTTP basic with the key as the user name and an empty password (the
guide's ``curl -u API-KEY:``). Errors come as ``{"error": {"code", "message",
"suggestion"}}``; the codes acted on are ``global/invalid-api-key`` and
``global/account-inactive`` (:class:`AuthError`), ``global/quota-exceeded``
(:class:`QuotaError`), ``instance-operations/launch/insufficient-capacity``
(:class:`NoCapacityError`) and ``global/object-does-not-exist`` (:class:`NotFoundError`).

Rate limits (the guide): about one request per second in general and one launch every 10
seconds; beyond them the API answers HTTP 429. A 429 is retried after the response's
``Retry-After`` (seconds or an HTTP date), else after an exponential back-off starting at
1 s (10 s for a launch), each wait capped at ``max_wait_s`` and at most ``retries`` times.
Reads and terminate (idempotent) are retried the same way after a transport error or a 5xx;
a launch is not, as it may have happened (the session looks for its instance by name).

The API sits behind a CDN that rejects anonymous clients, so every request carries the
User-Agent ``tokenwatt-bench/<version>``. The key never appears in an exception's text: all
text that came from the server or from httpx goes through :func:`tokenwatt.redact.scrub`
with the key as a secret.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tokenwatt import __version__
from tokenwatt.cloud.provider import (
    AuthError,
    CloudError,
    Instance,
    InstanceType,
    LaunchRequest,
    NoCapacityError,
    NotFoundError,
    QuotaError,
    RateLimitError,
    SshKey,
    Status,
)
from tokenwatt.errors import InputError, Problem
from tokenwatt.files import check_regular_file
from tokenwatt.redact import scrub

LAMBDA_API_URL = "https://cloud.lambda.ai/api/v1"
"""The API's base URL (the older host cloud.lambdalabs.com serves the same API)."""

USER_AGENT = f"tokenwatt-bench/{__version__}"

LAUNCH_INTERVAL_S = 10.0
"""Lambda's documented limit: one launch request every 10 seconds."""

_STATUSES: frozenset[str] = frozenset(
    {"booting", "active", "unhealthy", "terminating", "terminated"}
)
_AUTH_CODES = {"global/invalid-api-key", "global/account-inactive"}


def read_api_key(path: Path) -> str:
    """The API key from ``path``: a plain file of at most 4 KiB whose stripped text is the
    key. The key is never echoed, not even in the error.

    Raises:
        InputError: missing, not a plain file, too large, empty, or more than one line.
    """
    check_regular_file(path, what="API key file", max_bytes=4096)
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            [Problem(str(path), "", f"cannot read the API key file: {type(exc).__name__}")]
        ) from None
    if not text or any(c.isspace() for c in text):
        why = "is empty" if not text else "holds more than one word; it must hold the key only"
        raise InputError([Problem(str(path), "", f"the API key file {why}")])
    return text


def _retry_after(response: httpx.Response, default_s: float) -> float:
    """Seconds to wait as the response's ``Retry-After`` says (RFC 9110 §10.2.3: delay
    seconds or an HTTP date), else ``default_s``."""
    value = response.headers.get("retry-after")
    if value is None:
        return default_s
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return default_s
    return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())


class LambdaCloud:
    """The :class:`~tokenwatt.cloud.provider.Provider` for Lambda Cloud (synchronous).

    Args:
        api_key: the key (from :func:`read_api_key`).
        base_url: the API's base URL (tests point it at a double on 127.0.0.1).
        timeout_s: deadline of each request (connect, read, write, pool).
        retries: how many times a rate-limited (or, for idempotent requests, failed)
            request is retried.
        max_wait_s: the longest single wait before a retry (a larger Retry-After is cut).
        sleep: the waiting function (tests record the waits).
    """

    name = "lambda"

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = LAMBDA_API_URL,
        timeout_s: float = 30.0,
        retries: int = 5,
        max_wait_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._key = api_key
        self._retries = retries
        self._max_wait_s = max_wait_s
        self._sleep = sleep
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            auth=httpx.BasicAuth(api_key, ""),
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
            timeout=httpx.Timeout(timeout_s),
            follow_redirects=False,
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def _scrub(self, text: str) -> str:
        return scrub(text, [self._key])

    def _error(self, response: httpx.Response, what: str) -> CloudError:
        """The exception for an error answer, by Lambda's error code, else by status."""
        try:
            body = response.json()
            err = body.get("error", {}) if isinstance(body, dict) else {}
        except ValueError:
            err = {}
        code = str(err.get("code", "")) if isinstance(err, dict) else ""
        message = str(err.get("message", "")) if isinstance(err, dict) else ""
        suggestion = err.get("suggestion") if isinstance(err, dict) else None
        text = f"Lambda Cloud: {what}: HTTP {response.status_code}"
        text += f" {code}" if code else ""
        text += f": {message}" if message else f": {response.text[:200]}"
        text += f" ({suggestion})" if suggestion else ""
        text = self._scrub(text)
        if code in _AUTH_CODES or response.status_code == 401:
            return AuthError(text + "; check the key in --api-key-file (cloud.lambda.ai, API keys)")
        if code == "global/quota-exceeded":
            return QuotaError(text)
        if code == "instance-operations/launch/insufficient-capacity":
            return NoCapacityError(text)
        if code == "global/object-does-not-exist" or response.status_code == 404:
            return NotFoundError(text)
        if response.status_code == 429:
            return RateLimitError(text + f"; still rate-limited after {self._retries} retries")
        return CloudError(text)

    def _request(
        self, method: str, path: str, what: str, *, body: Any = None, idempotent: bool = True
    ) -> Any:
        """One API call with the bounded retries described in the module docstring; the
        response's ``data``."""
        backoff = LAUNCH_INTERVAL_S if path.endswith("/launch") else 1.0
        for attempt in range(self._retries + 1):
            last = attempt == self._retries
            try:
                response = self._client.request(method, path, json=body)
            except httpx.HTTPError as exc:
                if idempotent and not last:
                    self._sleep(min(backoff * 2**attempt, self._max_wait_s))
                    continue
                detail = self._scrub(f"{type(exc).__name__}: {exc}")
                raise CloudError(f"Lambda Cloud: {what}: {detail}") from None
            retry = response.status_code == 429 or (idempotent and response.status_code >= 500)
            if retry and not last:
                wait = _retry_after(response, backoff * 2**attempt)
                self._sleep(min(wait, self._max_wait_s))
                continue
            if response.status_code >= 400:
                raise self._error(response, what)
            try:
                payload = response.json()
            except ValueError:
                raise CloudError(f"Lambda Cloud: {what}: the answer is not JSON") from None
            if not isinstance(payload, dict) or "data" not in payload:
                raise CloudError(f"Lambda Cloud: {what}: the answer has no 'data'")
            return payload["data"]
        raise AssertionError("unreachable")  # pragma: no cover

    def instance_types(self) -> list[InstanceType]:
        """The types on offer, cheapest first (see the module docstring)."""
        data = self._request("GET", "/instance-types", "list instance types")
        out = []
        try:
            for entry in data.values():
                t = entry["instance_type"]
                regions = tuple(r["name"] for r in entry.get("regions_with_capacity_available", []))
                out.append(
                    InstanceType(
                        name=str(t["name"]),
                        description=str(t.get("description", "")),
                        gpus=int(t.get("specs", {}).get("gpus", 0)),
                        gpu_description=str(t.get("gpu_description", "")),
                        price_usd_per_hour=int(t["price_cents_per_hour"]) / 100,
                        regions=regions,
                    )
                )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise CloudError(f"Lambda Cloud: instance types: unexpected answer ({exc!r})") from None
        return sorted(out, key=lambda t: (t.price_usd_per_hour, t.name))

    def launch(self, request: LaunchRequest) -> str:
        """Launch one instance; its id. Not retried after a transport error or a 5xx."""
        body = {
            "region_name": request.region,
            "instance_type_name": request.type_name,
            "ssh_key_names": [request.ssh_key_name],
            "quantity": 1,
            "name": request.name,
        }
        data = self._request(
            "POST", "/instance-operations/launch", "launch", body=body, idempotent=False
        )
        try:
            ids = [str(i) for i in data["instance_ids"]]
        except (KeyError, TypeError):
            raise CloudError("Lambda Cloud: launch: the answer has no instance_ids") from None
        if len(ids) != 1:
            raise CloudError(f"Lambda Cloud: launch: expected one instance id, got {ids}")
        return ids[0]

    def instance(self, instance_id: str) -> Instance:
        """One instance (``NotFoundError`` once Lambda no longer knows it)."""
        data = self._request("GET", f"/instances/{instance_id}", f"instance {instance_id}")
        return _instance(data)

    def instances(self) -> list[Instance]:
        """The account's instances Lambda lists (not those already terminated)."""
        return [_instance(d) for d in self._request("GET", "/instances", "list instances")]

    def terminate(self, instance_id: str) -> None:
        """Ask Lambda to terminate the instance (idempotent: retried)."""
        self._request(
            "POST",
            "/instance-operations/terminate",
            f"terminate {instance_id}",
            body={"instance_ids": [instance_id]},
        )

    def ssh_keys(self) -> list[SshKey]:
        """The SSH keys of the account."""
        data = self._request("GET", "/ssh-keys", "list SSH keys")
        return [SshKey(str(k["name"]), str(k["public_key"]).strip(), k.get("id")) for k in data]

    def add_ssh_key(self, name: str, public_key: str) -> SshKey:
        """Register ``public_key`` under ``name`` (not retried: it is not idempotent)."""
        body = {"name": name, "public_key": public_key}
        data = self._request("POST", "/ssh-keys", "add SSH key", body=body, idempotent=False)
        return SshKey(str(data["name"]), str(data["public_key"]).strip(), data.get("id"))


def _instance(data: Any) -> Instance:
    if not isinstance(data, dict) or "id" not in data:
        raise CloudError("Lambda Cloud: an instance in the answer has no id")
    raw = str(data.get("status", "unknown"))
    status: Status = raw if raw in _STATUSES else "unknown"  # type: ignore[assignment]
    region = data.get("region") or {}
    itype = data.get("instance_type") or {}
    return Instance(
        id=str(data["id"]),
        name=data.get("name"),
        status=status,
        ip=data.get("ip"),
        region=region.get("name") if isinstance(region, dict) else None,
        type_name=itype.get("name") if isinstance(itype, dict) else None,
    )

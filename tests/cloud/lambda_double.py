"""A Lambda Cloud API double over real HTTP on 127.0.0.1 (pytest-httpserver's threaded
werkzeug server), with state: instance types with per-region capacity, instances that go
booting → active (after ``boot_polls`` reads) and terminating → terminated (after
``terminate_polls`` reads), SSH keys, and scripted faults.

Faults: ``script[(METHOD, PATH_SUFFIX)]`` is a list of ``(status, body, headers)`` answers
given (and consumed) before the real handling; ``terminate_failures`` makes that many
terminate calls fail with HTTP 500 first; ``terminate_never`` makes every terminate
fail; ``launch_then_fail`` launches, then answers 502 (a lost answer).
``requests`` logs ``(method, path, Authorization, User-Agent)``.

Not Lambda's API: ``POST /api/v1/_box/shutdown/IP`` (no key) is the box powering itself
off (the remote watchdog's test hook): every instance at that IP reads ``terminated``.

Errors have Lambda's shape ``{"error": {"code", "message", "suggestion"}}``.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

PREFIX = "/api/v1"
SHUTDOWN = PREFIX + "/_box/shutdown/"

TYPES: dict[str, dict[str, Any]] = {
    "gpu_1x_a10": {"price": 75, "gpus": 1, "gpu": "A10 (24 GB PCIe)", "regions": ["us-east-1"]},
    "gpu_1x_h100_sxm5": {
        "price": 329,
        "gpus": 1,
        "gpu": "H100 (80 GB SXM5)",
        "regions": ["us-west-3", "us-south-1"],
    },
    "gpu_8x_h100_sxm5": {"price": 2392, "gpus": 8, "gpu": "H100 (80 GB SXM5)", "regions": []},
}


def error(status: int, code: str, message: str, suggestion: str | None = None) -> tuple:
    """A scripted answer in Lambda's error shape."""
    return (status, {"error": {"code": code, "message": message, "suggestion": suggestion}}, {})


@dataclass
class DoubleInstance:
    id: str
    name: str
    type_name: str
    region: str
    ssh_key: str
    status: str = "booting"
    polls: int = 0
    ip: str | None = None


@dataclass
class LambdaDouble:
    """Serve the double; use as a context manager. ``url`` is the API base URL."""

    api_key: str = "secret_tokenwatt-test-key_0123456789abcdef"
    boot_polls: int = 2
    terminate_polls: int = 1
    terminate_failures: int = 0
    terminate_never: bool = False
    launch_then_fail: bool = False
    types: dict[str, dict[str, Any]] = field(default_factory=lambda: json.loads(json.dumps(TYPES)))
    script: dict[tuple[str, str], list[tuple]] = field(default_factory=dict)
    instances: dict[str, DoubleInstance] = field(default_factory=dict)
    keys: list[dict[str, str]] = field(default_factory=list)
    requests: list[tuple[str, str, str | None, str | None]] = field(default_factory=list)
    terminate_calls: int = 0
    url: str = ""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
        self._server.expect_request(re.compile(".*")).respond_with_handler(self._handle)

    def __enter__(self) -> LambdaDouble:
        self._server.start()
        self.url = f"http://127.0.0.1:{self._server.port}{PREFIX}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    def live(self) -> list[DoubleInstance]:
        """Instances not terminated (a leak, unless the output reported it)."""
        return [i for i in self.instances.values() if i.status != "terminated"]

    def _handle(self, request: Request) -> Response:
        auth = request.headers.get("Authorization")
        self.requests.append(
            (request.method, request.path, auth, request.headers.get("User-Agent"))
        )
        with self._lock:
            if request.method == "POST" and request.path.startswith(SHUTDOWN):
                return self._shutdown(request.path.removeprefix(SHUTDOWN))
            for (method, suffix), answers in self.script.items():
                if answers and request.method == method and request.path.endswith(suffix):
                    status, body, headers = answers.pop(0)
                    return _reply(status, body, headers)
            expected = "Basic " + base64.b64encode(f"{self.api_key}:".encode()).decode()
            if auth != expected:
                return _reply(
                    *error(
                        401,
                        "global/invalid-api-key",
                        "API key was invalid, expired, or deleted.",
                        "Check your API key or create a new one, then try again.",
                    )
                )
            path = request.path.removeprefix(PREFIX)
            body = request.get_json(silent=True) or {}
            return self._route(request.method, path, body)

    def _route(self, method: str, path: str, body: dict[str, Any]) -> Response:
        if method == "GET" and path == "/instance-types":
            return _ok({name: self._type(name) for name in self.types})
        if method == "POST" and path == "/instance-operations/launch":
            return self._launch(body)
        if method == "GET" and path == "/instances":
            return _ok([self._view(i) for i in self.instances.values() if i.status != "terminated"])
        if method == "GET" and path.startswith("/instances/"):
            inst = self.instances.get(path.removeprefix("/instances/"))
            if inst is None:
                return _reply(
                    *error(
                        404, "global/object-does-not-exist", "Specified instance does not exist."
                    )
                )
            self._advance(inst)
            return _ok(self._view(inst))
        if method == "POST" and path == "/instance-operations/terminate":
            return self._terminate(body)
        if method == "GET" and path == "/ssh-keys":
            return _ok(self.keys)
        if method == "POST" and path == "/ssh-keys":
            key = {
                "id": f"key{len(self.keys)}",
                "name": body["name"],
                "public_key": body["public_key"],
            }
            self.keys.append(key)
            return _ok(key)
        return _reply(*error(404, "global/object-does-not-exist", f"no route {method} {path}"))

    def _type(self, name: str) -> dict[str, Any]:
        t = self.types[name]
        return {
            "instance_type": {
                "name": name,
                "description": f"{t['gpus']}x {t['gpu']}",
                "gpu_description": t["gpu"],
                "price_cents_per_hour": t["price"],
                "specs": {"vcpus": 26, "memory_gib": 225, "storage_gib": 2800, "gpus": t["gpus"]},
            },
            "regions_with_capacity_available": [
                {"name": r, "description": r.upper()} for r in t["regions"]
            ],
        }

    def _launch(self, body: dict[str, Any]) -> Response:
        t = self.types.get(body.get("instance_type_name", ""))
        if t is None:
            return _reply(*error(400, "global/invalid-parameters", "unknown instance type"))
        if body.get("region_name") not in t["regions"]:
            return _reply(
                *error(
                    400,
                    "instance-operations/launch/insufficient-capacity",
                    "Not enough capacity to fulfill launch request.",
                    "Choose an instance type with more availability, or try again later.",
                )
            )
        names = {k["name"] for k in self.keys}
        if (
            body.get("ssh_key_names") != [n for n in body.get("ssh_key_names", []) if n in names]
            or len(body.get("ssh_key_names", [])) != 1
        ):
            return _reply(*error(400, "global/invalid-parameters", "exactly one known SSH key"))
        iid = f"i{next(self._ids):04d}"
        self.instances[iid] = DoubleInstance(
            iid,
            body.get("name", ""),
            body["instance_type_name"],
            body["region_name"],
            body["ssh_key_names"][0],
        )
        if self.launch_then_fail:  # launched, but the answer is lost
            return _reply(*error(502, "global/unknown", "Bad gateway"))
        return _ok({"instance_ids": [iid]})

    def _terminate(self, body: dict[str, Any]) -> Response:
        self.terminate_calls += 1
        if self.terminate_never or self.terminate_failures > 0:
            self.terminate_failures -= 1
            return _reply(*error(500, "global/unknown", "Something went wrong."))
        done = []
        for iid in body.get("instance_ids", []):
            inst = self.instances.get(iid)
            if inst is None:
                return _reply(
                    *error(
                        404, "global/object-does-not-exist", "Specified instance does not exist."
                    )
                )
            if inst.status != "terminated":
                inst.status, inst.polls = "terminating", 0
            done.append(self._view(inst))
        return _ok({"terminated_instances": done})

    def _shutdown(self, ip: str) -> Response:
        down = [i.id for i in self.instances.values() if i.ip == ip and i.status != "terminated"]
        for iid in down:
            self.instances[iid].status = "terminated"
        return _ok({"shut_down": down})

    def _advance(self, inst: DoubleInstance) -> None:
        inst.polls += 1
        if inst.status == "booting" and inst.polls > self.boot_polls:
            inst.status, inst.ip = "active", "127.0.0.1"
        elif inst.status == "terminating" and inst.polls > self.terminate_polls:
            inst.status = "terminated"

    def _view(self, inst: DoubleInstance) -> dict[str, Any]:
        t = self._type(inst.type_name)["instance_type"]
        return {
            "id": inst.id,
            "name": inst.name,
            "status": inst.status,
            "ip": inst.ip,
            "ssh_key_names": [inst.ssh_key],
            "file_system_names": [],
            "region": {"name": inst.region, "description": inst.region.upper()},
            "instance_type": t,
            "hostname": None,
        }


def _ok(data: Any) -> Response:
    return _reply(200, {"data": data}, {})


def _reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(body), status=status, content_type="application/json", headers=headers or {}
    )

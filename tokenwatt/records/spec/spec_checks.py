"""The checks a spec's fields pass before a run: an ``*_env`` field holds a variable's name,
a URL that records keep carries no secret and a real port, a power command and field carry no
password (:mod:`tokenwatt.records.spec.spec` calls them from its models' validators).

No message repeats the value refused: it may be the secret itself.
"""

from __future__ import annotations

import re
import shlex
from urllib.parse import urlsplit

from tokenwatt.records.shared.base import FieldValueError
from tokenwatt.records.spec.launch import PORT_PLACEHOLDER
from tokenwatt.redact import scrub

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECRET_QUERY = re.compile(r"key|token|secret|passw|auth|sig|credential", re.IGNORECASE)


def check_env_name(field: str, value: str | None) -> None:
    """An ``*_env`` field holds a variable's name; a pasted secret must not reach a record.

    The value is never repeated in the message: it may be the secret itself.
    """
    if value is not None and not _ENV_NAME.fullmatch(value):
        raise FieldValueError(
            field,
            "must be the name of an environment variable (letters, digits and '_', not "
            "starting with a digit), not the secret itself; the value is not shown here",
        )


def check_url_has_no_secret(field: str, url: str) -> None:
    """Refuse ``user:password@`` and ``?api_key=…`` in a URL that records will carry, and a
    port that is no TCP port (outside 1..65535: the run would fail only at connect).

    The URL is never repeated in the message: it holds the secret. Whitespace is refused
    too (a stray space from copying the URL would reach every request).
    """
    if any(ch.isspace() for ch in url):
        raise FieldValueError(
            field,
            "must not contain spaces or other whitespace (check for a stray space at its "
            "start or end)",
        )
    parts = urlsplit(url)
    try:
        has_user = parts.username is not None or parts.password is not None
    except ValueError:
        has_user = "@" in parts.netloc
    if has_user or "@" in parts.netloc:
        raise FieldValueError(
            field,
            "must not carry a user name or password (user:password@host): records keep this "
            "URL; give secrets through an environment variable (api_key_env, password_env)",
        )
    query_keys = [kv.split("=", 1)[0] for kv in parts.query.split("&") if kv]
    if any(_SECRET_QUERY.search(k) for k in query_keys) or _SECRET_QUERY.search(parts.fragment):
        raise FieldValueError(
            field,
            "must not carry a key or token in its query (?api_key=...): records keep this "
            "URL; give secrets through an environment variable (api_key_env, password_env)",
        )
    if scrub(parts.path) != parts.path:
        raise FieldValueError(
            field,
            "has a path that looks like it holds a key or token (sk-…, hf_…, token=…): records "
            "keep this URL; give secrets through an environment variable (api_key_env)",
        )
    if parts.scheme in ("http", "https") and not parts.hostname:
        raise FieldValueError(field, "must name a host (http://HOST:PORT/...)")
    if parts.netloc.endswith(f":{PORT_PLACEHOLDER}"):
        return  # a launched engine's free port, filled in before any request
    try:
        port = parts.port  # raises for a port outside 0..65535 or not a number
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        shown = parts.netloc.rsplit(":", 1)[-1]
        raise FieldValueError(field, f"has port {shown!r}: a port is a number from 1 to 65535")


_SECRET_OPTIONS = frozenset({"-P", "--password", "--pass", "--passwd", "--token", "--api-key"})
_URL_PASSWORD = re.compile(r"://[^/\s:@]+:[^/\s@]+@")
_SECRET_ASSIGN = re.compile(r"(?i)(pass(word|wd)?|token|secret|api[_-]?key)=")


def check_power_command(command: str) -> None:
    """``power.command`` must split like a shell line and carry no secret.

    The command line is kept in the record, so a password after ``-P`` (``ipmitool -P …``) or
    in a ``password=…`` argument would be published; the value is never repeated here.
    """
    try:
        args = shlex.split(command)
    except ValueError as exc:
        raise FieldValueError("command", f"cannot be split into arguments: {exc}") from None
    if not args:
        raise FieldValueError("command", "is empty")
    program = args[0].rsplit("/", 1)[-1]
    for i, arg in enumerate(args):
        option = arg.split("=", 1)[0]
        following = args[i + 1] if i + 1 < len(args) else ""
        attached = arg.startswith("-P") and len(arg) > 2 and not arg.startswith("--")
        if program == "sshpass" and arg.startswith("-p"):
            attached = True  # sshpass -p PASSWORD / -pPASSWORD
        user_pass = (arg in ("-u", "--user") and ":" in following) or (
            arg.startswith(("-u", "--user=")) and not arg.startswith("--") and ":" in arg
        )
        user_pass = user_pass or (arg.startswith("--user=") and ":" in arg)
        if _URL_PASSWORD.search(arg):
            user_pass = True
        if (
            (arg in _SECRET_OPTIONS and i + 1 < len(args))
            or (option in _SECRET_OPTIONS and "=" in arg)
            or attached
            or user_pass
        ):
            # Name the option when it holds no secret itself; else only its position.
            where = f"{option} …" if option in _SECRET_OPTIONS else f"argument {i + 1}"
            raise FieldValueError(
                "command",
                f"passes a secret on the command line ({where}), which the record "
                "would keep; let the command read it from the environment instead (e.g. "
                "ipmitool -E reads IPMI_PASSWORD, curl --netrc-file); the value is not shown "
                "here",
            )
        if _SECRET_ASSIGN.search(arg):
            raise FieldValueError(
                "command",
                "has an argument that looks like a secret (password=…, token=…), which the "
                "record would keep; pass it through the environment; the value is not shown here",
            )


def check_power_field(field: str) -> None:
    """A ``re:`` pattern must compile and have a group to read (``watts`` or group 1)."""
    if not field.startswith("re:"):
        return
    try:
        pattern = re.compile(field[3:])
    except re.error as exc:
        raise FieldValueError("field", f"is not a valid regular expression: {exc}") from None
    if "watts" not in pattern.groupindex and pattern.groups < 1:
        raise FieldValueError(
            "field", "needs a group to read the number from: (?P<watts>...) or (...)"
        )

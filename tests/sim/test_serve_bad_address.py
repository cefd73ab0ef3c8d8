"""``tokenwatt sim`` on an address it cannot listen on: exit 2 naming --host/--port."""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from tokenwatt.cli import cli
from tokenwatt.errors import InputError
from tokenwatt.sim.serve import make_server, serve


def test_port_in_use_is_an_input_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(InputError) as exc:
            serve(make_server("bf16-kv"), "127.0.0.1", port)
    assert [str(p) for p in exc.value.problems] == [
        f"127.0.0.1:{port}: --host/--port: cannot listen there: Address already in use"
    ]


def test_unknown_host_is_an_input_error() -> None:
    with pytest.raises(InputError) as exc:
        serve(make_server("bf16-kv"), "no-such-host.invalid", 0)
    assert str(exc.value.problems[0]).startswith(
        "no-such-host.invalid:0: --host/--port: cannot listen there: "
    )


@pytest.mark.parametrize("port", ["-1", "65536"])
def test_port_outside_the_range_is_a_usage_error(port: str) -> None:
    result = CliRunner().invoke(cli, ["sim", "--port", port])
    assert result.exit_code == 2
    assert "Invalid value for '--port'" in result.output

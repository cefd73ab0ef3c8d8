"""``ipmitool dcmi power reading`` output fixtures and the ``command`` source's field picking.

The sources run real subprocesses: a small script stands in for ipmitool and prints a
recorded output, so argument building and the password hand-off are checked too.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from tests.telemetry.conftest import run_window
from tokenwatt.errors import TelemetryError
from tokenwatt.records.spec.spec import PowerSpec
from tokenwatt.telemetry import ManualClock, PowerMeter
from tokenwatt.telemetry.command import CommandSource, pick_reading
from tokenwatt.telemetry.ipmi import IpmiSource, parse_dcmi_power_reading

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ipmitool"


def _fake_ipmitool(tmp_path: Path, fixture: str, exit_code: int = 0) -> Path:
    """A stand-in ipmitool: logs its argv and IPMI_PASSWORD, prints a fixture."""
    script = tmp_path / "ipmitool"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"log = {str(tmp_path / 'calls.jsonl')!r}\n"
        "with open(log, 'a') as f:\n"
        "    f.write(json.dumps([sys.argv[1:], os.environ.get('IPMI_PASSWORD')]) + '\\n')\n"
        f"sys.stdout.write(open({str(FIXTURES / fixture)!r}).read())\n"
        f"sys.exit({exit_code})\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_parse_recorded_outputs() -> None:
    assert parse_dcmi_power_reading((FIXTURES / "dcmi-power-reading.txt").read_text()) == 412.0
    with pytest.raises(ValueError, match="deactivated"):
        parse_dcmi_power_reading((FIXTURES / "dcmi-power-reading-deactivated.txt").read_text())
    with pytest.raises(ValueError, match="Invalid command"):
        parse_dcmi_power_reading((FIXTURES / "dcmi-unsupported.txt").read_text())


def test_local_bmc_window(tmp_path: Path, clock: ManualClock) -> None:
    exe = _fake_ipmitool(tmp_path, "dcmi-power-reading.txt")
    source = IpmiSource(PowerSpec(source="ipmi"), environ={}, executable=str(exe))
    meter = PowerMeter(source, 1.0, clock=clock)
    w = run_window(meter, clock, 4.0)
    meter.close()
    assert w.valid and w.scope == "node" and w.energy_method == "integrated"
    assert w.energy_j == pytest.approx(4 * 412.0)
    calls = [json.loads(x) for x in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert calls[0] == [["dcmi", "power", "reading"], None]


def test_remote_bmc_password_via_environment(tmp_path: Path) -> None:
    exe = _fake_ipmitool(tmp_path, "dcmi-power-reading.txt")
    spec = PowerSpec(source="ipmi", host="10.0.0.5", username="admin", password_env="BMC_PW")
    IpmiSource(spec, environ={"BMC_PW": "hunter2"}, executable=str(exe))
    argv, password = json.loads((tmp_path / "calls.jsonl").read_text().splitlines()[0])
    assert argv == [
        "-I",
        "lanplus",
        "-H",
        "10.0.0.5",
        "-U",
        "admin",
        "-E",
        "dcmi",
        "power",
        "reading",
    ]
    assert password == "hunter2"
    assert "hunter2" not in argv


def test_ipmi_failures(tmp_path: Path) -> None:
    exe = _fake_ipmitool(tmp_path, "dcmi-unsupported.txt", exit_code=1)
    with pytest.raises(TelemetryError, match="exit status 1"):
        IpmiSource(PowerSpec(source="ipmi"), environ={}, executable=str(exe))
    with pytest.raises(TelemetryError, match="not found"):
        IpmiSource(PowerSpec(source="ipmi"), environ={}, executable=str(tmp_path / "nope"))


def test_pick_reading_forms() -> None:
    assert pick_reading(" 412.5\n", None) == 412.5
    nvsmi = "    Power Draw                        : 612.34 W\n"
    assert pick_reading(nvsmi, r"re:Power Draw\s*:\s*([0-9.]+)") == 612.34
    assert pick_reading("total=1.5kW watts=1500", r"re:watts=(?P<watts>\d+)") == 1500.0
    doc = json.dumps({"readings": [{"watts": 412.5}], "node": {"power": {"w": "377"}}})
    assert pick_reading(doc, "readings.0.watts") == 412.5
    assert pick_reading(doc, "node.power.w") == 377.0
    with pytest.raises(ValueError, match="not found"):
        pick_reading(doc, "readings.3.watts")
    with pytest.raises(ValueError, match="did not match"):
        pick_reading("nothing", "re:(\\d+) W")


def test_command_source(tmp_path: Path, clock: ManualClock) -> None:
    script = tmp_path / "reading.py"
    script.write_text('import json; print(json.dumps({"power": {"watts": 350.0}}))\n')
    spec = PowerSpec(source="command", command=f"{sys.executable} {script}", field="power.watts")
    meter = PowerMeter(CommandSource(spec), 1.0, clock=clock)
    w = run_window(meter, clock, 3.0)
    meter.close()
    assert w.valid and w.energy_j == pytest.approx(1050.0)
    bad = PowerSpec(source="command", command=f"{sys.executable} {script}", field="power.volts")
    with pytest.raises(TelemetryError, match="key path"):
        CommandSource(bad)


@pytest.mark.parametrize(
    ("output", "field", "message"),
    [
        (b"nan\n", None, "not a power reading"),
        (b"inf\n", None, "not a power reading"),
        (b"1e308\n", None, "not a power reading"),
        (b"\xff\xfe412\n", None, r"not UTF-8 text \(byte 0\)"),
        (b"[" * 100_000 + b"]" * 100_000, "0", "nested too deep"),
        (b'{"w": "nan"}', "w", "not a power reading"),
    ],
    ids=["nan", "inf", "1e308", "not-utf8", "deep-json", "nan-in-json"],
)
def test_a_garbage_reading_is_a_failed_read_with_a_reason_not_a_crash(
    tmp_path: Path, output: bytes, field: str | None, message: str
) -> None:
    """What a real subprocess prints is data: garbage becomes a ReadError the meter counts."""
    out = tmp_path / "out.bin"
    out.write_bytes(output)
    script = tmp_path / "reading.py"
    script.write_text(f"import sys; sys.stdout.buffer.write(open({str(out)!r}, 'rb').read())\n")
    spec = PowerSpec(source="command", command=f"{sys.executable} {script}", field=field)
    with pytest.raises(TelemetryError, match=message):
        CommandSource(spec)


def test_garbage_mid_window_makes_those_readings_fail_and_keeps_the_rest(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The third and later readings print ``nan``: they are failed reads, noted, and the
    window (baseline, one good sample, then a gap) is judged by the existing rules."""
    count = tmp_path / "count"
    script = tmp_path / "reading.py"
    script.write_text(
        "import pathlib\n"
        f"p = pathlib.Path({str(count)!r})\n"
        "n = int(p.read_text()) if p.exists() else 0\n"
        "p.write_text(str(n + 1))\n"
        "print('nan' if n >= 3 else '350')\n"
    )
    spec = PowerSpec(source="command", command=f"{sys.executable} {script}")
    # Reads 0 (opening the source) and 1 (the window's baseline) are good.
    meter = PowerMeter(CommandSource(spec), 1.0, clock=clock)
    w = run_window(meter, clock, 5.0)
    meter.close()
    assert w.samples == 1  # counted samples: t=1 only (t=0 is the baseline)
    assert any(n.startswith("5 readings failed (last: ") and "nan" in n for n in w.notes)
    assert not w.valid and any("gap of 4.0 s" in r for r in w.invalid_reasons)


@pytest.mark.parametrize(
    ("command", "field", "path", "message"),
    [
        ("reader 'unbalanced", None, "power.command", "cannot be split into arguments"),
        ("ipmitool -H bmc -P hunter2 dcmi power reading", None, "power.command", "-P"),
        ("reader --password=hunter2", None, "power.command", "--password"),
        ("reader token=hunter2", None, "power.command", "looks like a secret"),
        ("ipmitool -H bmc -U admin -Phunter2 dcmi power reading", None, "power.command", "arg"),
        ("sshpass -phunter2 ssh bmc read-power", None, "power.command", "argument 2"),
        ("curl -u admin:hunter2 http://bmc/power", None, "power.command", "argument 2"),
        ("curl http://admin:hunter2@bmc/power", None, "power.command", "argument 2"),
        ("reader", "re:([0-9", "power.field", "not a valid regular expression"),
        ("reader", "re:[0-9]+", "power.field", "needs a group"),
    ],
    ids=[
        "quote",
        "ipmitool-P",
        "password-option",
        "token-assign",
        "ipmitool-P-attached",
        "sshpass",
        "curl-user",
        "url-password",
        "bad-regex",
        "no-group",
    ],
)
def test_power_settings_are_checked_when_the_spec_loads(
    tmp_path: Path, command: str, field: str | None, path: str, message: str
) -> None:
    """Bad quoting, a secret on the command line, a bad pattern: one clear error at load,
    naming the field, and never repeating the secret."""
    from tokenwatt.errors import SpecError
    from tokenwatt.records import load_spec

    src = Path(__file__).resolve().parents[1] / "fixtures" / "sim.spec.yaml"
    import yaml

    data = yaml.safe_load(src.read_text())
    data["power"] = {"source": "command", "command": command}
    if field is not None:
        data["power"]["field"] = field
    spec_file = tmp_path / "bad.spec.yaml"
    spec_file.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as info:
        load_spec(spec_file)
    text = str(info.value)
    assert path in text and message in text
    assert "hunter2" not in text


def test_a_device_selection_a_node_reading_cannot_honour_is_said(
    tmp_path: Path, clock: ManualClock
) -> None:
    """hardware.gpus picks GPUs; a command measuring the node cannot: the window says so."""
    from tokenwatt.records import load_spec
    from tokenwatt.telemetry import open_meter

    script = tmp_path / "reading.py"
    script.write_text("print(350)\n")
    spec = load_spec(Path(__file__).resolve().parents[1] / "fixtures" / "sim.spec.yaml")
    spec = spec.model_copy(
        update={
            "hardware": spec.hardware.model_copy(update={"adapter": "none", "gpus": [0, 1]}),
            "power": PowerSpec(source="command", command=f"{sys.executable} {script}"),
        }
    )
    meter = open_meter(spec, clock=clock, environ={})
    w = run_window(meter, clock, 3.0)
    meter.close()
    assert w.valid and w.scope == "node"
    assert (
        "hardware.gpus [0, 1] selects devices, but command power is a node-level reading of "
        "all of them"
    ) in w.notes

"""Stage package: collect, the measurement of one engine configuration (``tokenwatt collect``).

The CLI calls :func:`measure_configuration` with :class:`CollectOptions` and its own
:class:`Reporter` (collect never prints: every line the user sees goes through it), and
maps :class:`StopSignal` to an exit status with :func:`exit_status`; ``tokenwatt suites``
uses :func:`fetch_gsm8k` and :func:`build_suite_file`. The load generator, the SLO search,
the windows and the instruments are internal: their modules import each other directly.

Importing this package loads the whole collector (aiohttp, httpx, the power sources'
interface); the CLI imports it inside the commands that need it, so ``tokenwatt --help``
stays fast.
"""

from tokenwatt.collect.accuracy.suites import GSM8K_BASE_URL, build_suite_file, fetch_gsm8k
from tokenwatt.collect.load.pool.workers import usable_cores
from tokenwatt.collect.measure.progress import NullReporter, Reporter, WindowSnapshot
from tokenwatt.collect.measure.request_log import read_rows
from tokenwatt.collect.measure.stopping import StopSignal, exit_status
from tokenwatt.collect.plan.init_spec import board_facts, model_config_facts, read_server, spec_text
from tokenwatt.collect.plan.modes import apply_mode
from tokenwatt.collect.plan.options import CollectOptions
from tokenwatt.collect.plan.point import FLAGS_SPEC, PointFlags, check_endpoint_flag, parse_list
from tokenwatt.collect.run import measure_configuration
from tokenwatt.collect.session import check_session, plan_steps, run_session

__all__ = [
    "FLAGS_SPEC",
    "GSM8K_BASE_URL",
    "CollectOptions",
    "NullReporter",
    "PointFlags",
    "Reporter",
    "StopSignal",
    "WindowSnapshot",
    "apply_mode",
    "board_facts",
    "build_suite_file",
    "check_endpoint_flag",
    "check_session",
    "exit_status",
    "fetch_gsm8k",
    "measure_configuration",
    "model_config_facts",
    "parse_list",
    "plan_steps",
    "read_rows",
    "read_server",
    "run_session",
    "spec_text",
    "usable_cores",
]

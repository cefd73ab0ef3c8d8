"""The simulated engine: an OpenAI-compatible HTTP server with continuous-batching behaviour.

``tokenwatt sim`` runs it so the whole pipeline can be tried without a GPU; its run records
are marked ``simulated: true`` and are never published as measurements (the guide).

Independent of the other stages: it imports only :mod:`tokenwatt.records` and
:mod:`tokenwatt.errors`, and only the CLI imports it (``lint-imports`` checks both).
"""

from tokenwatt.records import SIM_VERSION
from tokenwatt.sim.engine import PROFILES, Engine, Profile, SimRequest, simulate
from tokenwatt.sim.serve import make_server, serve
from tokenwatt.sim.server import SimServer, create_app, start_server

__all__ = [
    "PROFILES",
    "SIM_VERSION",
    "Engine",
    "Profile",
    "SimRequest",
    "SimServer",
    "create_app",
    "make_server",
    "serve",
    "simulate",
    "start_server",
]

"""The simulated engine: an OpenAI-compatible HTTP server with continuous-batching behaviour.

``tokenwatt sim`` runs it so the whole pipeline can be tried without a GPU; its run records
are marked ``simulated: true`` and are never published as measurements (the README).
"""

from tokenwatt.sim.engine import PROFILES, Engine, Profile, SimRequest, simulate
from tokenwatt.sim.serve import serve
from tokenwatt.sim.server import SIM_VERSION, SimServer, create_app, start_server

__all__ = [
    "PROFILES",
    "SIM_VERSION",
    "Engine",
    "Profile",
    "SimRequest",
    "SimServer",
    "create_app",
    "serve",
    "simulate",
    "start_server",
]

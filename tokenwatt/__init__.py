"""TokenWatt Bench: SLO goodput, tokens per joule, MBU and an accuracy gate for LLM serving.

The package is laid out by stage of the data flow: ``records`` (schemas), ``collect``,
``telemetry``, ``analysis`` (pure functions), ``site``, ``sim`` and ``cloud``.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]

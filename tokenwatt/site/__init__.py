"""Report records → the MkDocs Material lab-notes site (``tokenwatt build``).

Nothing here talks to the network: vega-embed comes from vl-convert at build time and is
shipped with the site. The public entry point is :func:`build_site`.
"""

from tokenwatt.site.build import BuildResult, build_site
from tokenwatt.text import bidi_isolated

__all__ = [
    "BuildResult",
    "bidi_isolated",
    "build_site",
]

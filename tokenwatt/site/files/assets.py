"""Files the site ships besides its pages: vega-embed, our chart script, our CSS.

vega, vega-lite and vega-embed come from ``vl_convert.javascript_bundle()`` at build time
(never committed, never fetched from a CDN) and are cached under the cache folder, keyed by
the vl-convert version, because making the bundle takes seconds.
"""

from __future__ import annotations

import contextlib
from importlib.metadata import version
from pathlib import Path
from typing import Any

from tokenwatt.files import atomic_write_bytes

BUNDLE_PATH = "assets/javascripts/vega-bundle.js"
CHARTS_PATH = "assets/javascripts/tokenwatt-charts.js"
CSS_PATH = "assets/stylesheets/tokenwatt.css"


def vega_bundle(cache_dir: Path, *, write_cache: bool = True) -> bytes:
    """vega + vega-lite + vega-embed as one script that sets ``window.vegaEmbed``.

    Read from ``cache_dir`` when a bundle for the installed vl-convert version is there;
    else made with ``vl_convert.javascript_bundle()`` (about 2-3 s) and, with
    ``write_cache``, stored there (written atomically).
    """
    name = f"vega-bundle-vl-convert-{version('vl-convert-python')}.js"
    cached = cache_dir / name
    if cached.is_file():
        return cached.read_bytes()
    import vl_convert

    # The stub wants a snippet; without one the bundle sets window.vegaEmbed (documented).
    converter: Any = vl_convert
    data = str(converter.javascript_bundle()).encode("utf-8")
    if write_cache:
        # A cache that cannot be written (disk full, read-only) only costs time.
        with contextlib.suppress(OSError):
            atomic_write_bytes(cached, data, durable=False)
    return data


def static_assets(templates: Path) -> dict[str, bytes]:
    """Our own chart script and stylesheet from ``site_templates/assets/``."""
    folder = templates / "assets"
    return {
        CHARTS_PATH: (folder / "tokenwatt-charts.js").read_bytes(),
        CSS_PATH: (folder / "tokenwatt.css").read_bytes(),
    }

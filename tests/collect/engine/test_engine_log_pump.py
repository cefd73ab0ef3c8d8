"""The engine's log process (`tokenwatt.engine_log`) as a real child process: a secret that
straddles the cut of a line too long to hold is still scrubbed, and the line is not split."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tokenwatt.engine_log import MAX_LINE_BYTES
from tokenwatt.redact import REDACTED

REPO = Path(__file__).resolve().parents[3]
KEY = "ZqX9secretvaluE77"


def test_a_secret_across_a_long_lines_cut_is_scrubbed(tmp_path: Path) -> None:
    log = tmp_path / "e.engine.log"
    main = "import sys; from tokenwatt.engine_log import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "PYTHONPATH": str(REPO), "MY_TOKEN": KEY}
    proc = subprocess.Popen(
        [sys.executable, "-c", main, str(log), "0", "1"], stdin=subprocess.PIPE, env=env
    )
    assert proc.stdin is not None
    head = b"A" * (2 * MAX_LINE_BYTES - 6)
    proc.stdin.write(head + KEY[:6].encode())
    proc.stdin.flush()
    time.sleep(0.5)  # the pump writes the long start before the rest of the key arrives
    proc.stdin.write(KEY[6:].encode() + b" more\nnext line " + KEY.encode() + b"\n")
    proc.stdin.close()
    assert proc.wait(timeout=20) == 0
    text = log.read_text(encoding="utf-8")
    assert KEY not in text and KEY[:6] + "\n" not in text and not text.startswith(KEY[6:])
    lines = text.splitlines()
    assert lines == [head.decode() + f"{REDACTED} more", f"next line {REDACTED}"]

"""Measured figures a cocotb bench hands back to pytest.

Inside the simulator, :func:`record` merges values into the JSON file named by
``FRED_METRICS_FILE`` (set by :func:`cocotb_tests.runner.run_bench`); the runner returns them as
``BenchResult.metrics``. Outside a bench run it is a no-op.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["record"]


def record(**values) -> None:
    path = os.environ.get("FRED_METRICS_FILE")
    if not path:
        return
    path = Path(path)
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(values)
    path.write_text(json.dumps(data, indent=2, sort_keys=True))

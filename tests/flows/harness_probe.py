"""Not collected by the suite (no ``test_`` prefix): run explicitly by ``test_pytest_harness.py``.

Starts the session's Prefect test server, writes its uvicorn pid to ``$PROBE_PID_FILE`` and waits to be killed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def test_hold_the_harness(prefect_harness):
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer._instances[None]
    Path(os.environ["PROBE_PID_FILE"]).write_text(str(server.server_process.pid))
    time.sleep(300)

"""OpenMP's wait policy for the project's CPU-bound libraries: torch (MiniLM encoding, vLLM's CPU kernels), FAISS.

libgomp reads ``OMP_WAIT_POLICY`` once, when it is loaded: at the first ``import torch`` or ``import faiss`` of a
process, or before Python runs when it is in ``LD_PRELOAD`` (as vLLM's CPU install guide suggests, and as vLLM
exports for the processes it spawns); setting it later changes nothing. By default idle OpenMP threads spin
(libgomp's spin count 300,000) before they sleep, which on a 2-core machine takes the cores from everything
else; ``PASSIVE`` makes them sleep at once (spin count 0). Measured on the project's 2-core machine:

* FAISS IVF-PQ training of 3,000 vectors on a busy machine: 30 s spinning against 3.8 s passive;
* MiniLM encoding on a busy machine: 5-7x slower spinning;
* vLLM, 8 ELA-sized chats (48 tokens each) beside one other CPU-bound process: 32.5 s spinning against 21.9 s
  passive, the other process 16 % faster beside it; alone 12.8 s both; one sequence decoding 128 tokens alone
  ~7 % slower passive (11.3-12.3 s against 12.5-12.8 s, 3 runs each).

A value the user exported always wins. Children inherit the variable, so they are passive whatever they load.
"""

from __future__ import annotations

import os

#: The variable and the value this project defaults it to.
WAIT_POLICY = ("OMP_WAIT_POLICY", "PASSIVE")


def prefer_passive_wait() -> None:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless the environment has a value; call before torch or faiss loads."""
    os.environ.setdefault(*WAIT_POLICY)

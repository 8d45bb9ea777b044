"""A short interpreter switch interval while pipelines run.

Synthesis, prep and the GPU workers spend their time in native code that drops the
interpreter lock (numpy, the curve library, CUDA calls) and retake it between calls. When
any other thread is running Python, a retake waits until that thread is made to yield: up
to the switch interval, 5 ms by default. Synthesis retakes the lock thousands of times a
partition, so with a dozen threads the default made a 2^22 synthesis take 44.7 s on the H200
machine (14 threads); at 0.2 ms, with 8x larger numpy chunks, it took 10.8-13.5 s, as much as in
processes of their own.

Runs may overlap (a notebook can start one while another runs): the interval is lowered by
the first and restored by the last.
"""

from __future__ import annotations

import sys
import threading

SWITCH_INTERVAL_S = 2e-4

_lock = threading.Lock()
_active = 0
_saved = 0.0


def enter() -> None:
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_saved, SWITCH_INTERVAL_S))
        _active += 1


def leave() -> None:
    global _active
    with _lock:
        if _active == 0:
            return
        _active -= 1
        if _active == 0:
            sys.setswitchinterval(_saved)

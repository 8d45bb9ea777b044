"""Runs a test many times in a row while busy loops load every core: how an intermittent test
(a race that shows under load, such as the old Ctrl-C-in-setup hang) is shown fixed.

    python benchmarks/repeat_under_load.py \\
        "tests/test_pipeline.py::test_interrupt_stops_within_the_phase_in_flight_and_keeps_the_trace" \\
        [--times 50] [--burners 2]

Each repetition is a parameter of its own (its own fixtures, setup and teardown), the session
stops at the first failure (-x), and a repetition that hangs for 300 s dumps every thread's
stack and fails. The burners are ended however the session ends.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from pathlib import Path
from typing import Any

import pytest


def _burn() -> None:
    while True:
        pass


class Repeat:
    """The test parametrised over 1..times, as a pytest plugin."""

    def __init__(self, times: int) -> None:
        self.times = times

    @pytest.fixture
    def _repetition(self, request: Any) -> int:
        return int(request.param)

    def pytest_generate_tests(self, metafunc: Any) -> None:
        metafunc.fixturenames.append("_repetition")
        metafunc.parametrize("_repetition", range(1, self.times + 1), indirect=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("test", help="a pytest node id")
    parser.add_argument("--times", type=int, default=50)
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 2,
                        help="busy loops (default: one a core)")
    args = parser.parse_args()
    # The tests of this checkout run against its own package, not an installed one.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.burners)]
    for burner in burners:
        burner.start()
    try:
        return int(pytest.main(["-q", "-x", "-p", "no:cacheprovider", "-o", "faulthandler_timeout=300",
                                args.test], plugins=[Repeat(args.times)]))
    finally:
        for burner in burners:
            burner.kill()
            burner.join()


if __name__ == "__main__":
    sys.exit(main())

"""A pytest plugin for a test run that may be stopped before its end (benchmarks.gpu_check):
each failure's report is appended to the file named by $PYTEST_FAILURES_FILE as soon as the
test fails, instead of only in pytest's summary at the end. Load it with
`-p benchmarks.pytest_failures`; under pytest-xdist the controller writes, not the workers."""

import os

VARIABLE = "PYTEST_FAILURES_FILE"


def pytest_runtest_logreport(report):
    path = os.environ.get(VARIABLE)
    if report.failed and path and not os.environ.get("PYTEST_XDIST_WORKER"):
        with open(path, "a", encoding="utf8") as out:
            out.write(f"==== {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")

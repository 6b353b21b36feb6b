"""Runs one unittest file and writes each case's outcome as JUnit XML to $XML_OUTPUT_FILE, which
Bazel and .ci/run read (one testcase per test, so the Python cases count in CI's line like the
C++ ones). Exits non-zero when a case fails or none ran.

Usage (from exporter_test.sh): python junit_runner.py path/to/some_test.py
"""

import importlib.util
import os
import sys
import unittest
from xml.sax.saxutils import escape, quoteattr


class _XmlResult(unittest.TextTestResult):
    """A TextTestResult that also records each test's outcome."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = []

    def _record(self, test, kind, detail=""):
        self.outcomes.append((test.id(), kind, detail))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "ok")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failure", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self._exc_info_to_string(err, test))

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = "failure" if issubclass(err[0], test.failureException) else "error"
            self._record(subtest, kind, self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)


def _write_xml(result, suite, path):
    # A test with failing subtests appears once per failing subtest and is not also a success.
    failing = {tid.split(" ")[0] for tid, kind, _ in result.outcomes if kind in ("failure", "error")}
    rows = [(tid, kind, detail) for tid, kind, detail in result.outcomes
            if not (kind == "ok" and tid in failing)]
    failures = sum(kind in ("failure", "error") for _, kind, _ in rows)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<testsuites><testsuite name=%s tests="%d" failures="%d">' % (quoteattr(suite), len(rows), failures)]
    for tid, kind, detail in rows:
        lines.append("<testcase name=%s classname=%s>" % (quoteattr(tid), quoteattr(suite)))
        if kind in ("failure", "error"):
            lines.append("<%s message=%s>%s</%s>" % (kind, quoteattr(kind), escape(detail), kind))
        elif kind == "skipped":
            lines.append("<skipped message=%s/>" % quoteattr(detail))
        lines.append("</testcase>")
    lines.append("</testsuite></testsuites>")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main(path):
    name = os.path.splitext(os.path.basename(path))[0]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    result = unittest.TextTestRunner(verbosity=2, resultclass=_XmlResult).run(suite)
    if os.environ.get("XML_OUTPUT_FILE"):
        _write_xml(result, name, os.environ["XML_OUTPUT_FILE"])
    return 0 if result.wasSuccessful() and result.testsRun > 0 else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: junit_runner.py TEST_PY")
    sys.exit(main(sys.argv[1]))

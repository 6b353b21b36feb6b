"""ExportTestCase, the base of the exporter tests: a scratch folder per test, and export_and_check,
which exports a policy with tdpolicy.export and compares the C++ `tdp` with Python through
tdpolicy.check.

The test files import it as a sibling module: junit_runner.py puts this folder on sys.path, and
python_exporter_test (defs.bzl) puts this file in every test's runfiles.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch

import tdpolicy
from tdpolicy._check import input_document, output_entries

_MAX_DIFF = re.compile(r"max \|C\+\+ - Python\| (\S+)")


class ExportTestCase(unittest.TestCase):
    """Each test starts from torch.manual_seed(0) in a scratch folder of its own (self.dir, removed
    after the test; self.path(name) is a file in it). The class attributes are what
    export_and_check does where a call does not say; a subclass sets its own."""

    # The suffixes export_and_check appends to its `name`, one export and check each; "" takes the
    # name as given, extension included.
    formats = ("",)
    # tdp's --backend of each check, in order.
    backends = ("libtorch",)
    # atol and rtol of the checks that run the fused CPU plan (backends auto and fused) in a call
    # with fused=True; every other check is to 1e-6.
    fused_tolerance = 1e-5
    # A dict in a subclass that wants it: the largest |C++ - Python| per export and backend, filled
    # by export_and_check and record_diff, printed after the class's tests.
    max_diffs = None

    def setUp(self):
        torch.manual_seed(0)
        self.dir = tempfile.mkdtemp(prefix="tdpolicy_test_", dir=os.environ.get("TEST_TMPDIR"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        for what, diff in sorted((cls.max_diffs or {}).items()):
            print("max |C++ - Python| %-60s %.3g" % (what, diff), file=sys.stderr)

    def path(self, name):
        return os.path.join(self.dir, name)

    def entries(self, report):
        """The keys a check compared."""
        return {key for key, _, _ in report.entries}

    def tdp_run(self, path, td, *flags):
        """`tdp run PATH --input=JSON FLAGS...` on td's entries: the finished process (returncode,
        stdout, stderr)."""
        input_path = self.path("tdp_run_input.json")
        with open(input_path, "w") as f:
            json.dump(input_document(td.items(include_nested=True, leaves_only=True)), f)
        return subprocess.run([tdpolicy.find_tdp(), "run", path, "--input=" + input_path, *flags],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def tdp_outputs(self, path, td, *flags):
        """tdp_run, which must succeed: the C++ output TensorDict as {key: float64 tensor}, a nested
        key as a tuple."""
        result = self.tdp_run(path, td, *flags)
        self.assertEqual(result.returncode, 0, result.stderr)
        return output_entries(result.stdout)

    def record_diff(self, what, diff):
        self.max_diffs[what] = max(self.max_diffs.get(what, 0.0), diff)

    def export_and_check(self, actor, td, name, actions=None, *, formats=None, backends=None, fused=False,
                         interaction="deterministic", **export_kwargs):
        """Exports `actor` with `td` as the example to self.path(name + suffix) for each suffix of
        `formats` (export_kwargs go to tdpolicy.export), then checks each file with tdpolicy.check
        once per backend of `backends`: `tdp` loads it (running the spec's self tests) and runs it
        on `td` updated with `actions` (the log-probs of those actions are compared too) under
        `interaction`, and every output key must equal Python's, to 1e-6. With `fused` (the spec
        lowers to the fused CPU plan) each file is also checked on the fused backend, which
        refuses to load a spec that does not lower, and the checks on the auto and fused backends
        are to self.fused_tolerance. formats and backends default to the class's.

        Asserts that each export wrote its file and that each check is ok and compared at least one
        key. Returns the first export's spec and its first check's report."""
        formats = self.formats if formats is None else formats
        backends = tuple(self.backends if backends is None else backends) + (("fused",) if fused else ())
        check_td = td.clone()
        if actions is not None:
            check_td.update(actions)
        first = None
        for suffix in formats:
            path = self.path(name + suffix)
            spec = tdpolicy.export(actor, path, example=td, **export_kwargs)
            self.assertTrue(os.path.isfile(path))
            for backend in backends:
                tolerance = self.fused_tolerance if fused and backend in ("auto", "fused") else 1e-6
                # The self tests run once per file (they do not depend on the backend).
                report = tdpolicy.check(path, actor, check_td, backend=backend, atol=tolerance, rtol=tolerance,
                                        interaction=interaction, self_tests=backend == backends[0])
                self.assertTrue(report.ok, str(report))
                self.assertGreater(len(report.entries), 0)
                if self.max_diffs is not None:
                    worst = max(float(m.group(1)) for m in (_MAX_DIFF.search(d) for _, _, d in report.entries) if m)
                    self.record_diff("%s [%s]" % (name + suffix, backend), worst)
                if first is None:
                    first = spec, report
        return first

    def assert_export_error(self, actor, td, path_text, type_text, why):
        """tdpolicy.export refuses `actor` with an ExportError naming the module's path and type and
        matching the regex `why`, and leaves no file behind."""
        with self.assertRaises(tdpolicy.ExportError) as raised:
            tdpolicy.export(actor, self.path("err.pbtxt"), example=td)
        message = str(raised.exception)
        self.assertIn(path_text, message)
        self.assertIn(type_text, message)
        self.assertRegex(message, why)
        self.assertFalse(os.path.exists(self.path("err.pbtxt")))

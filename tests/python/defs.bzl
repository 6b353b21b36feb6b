"""python_exporter_test: one Python test file of the tdpolicy package, run by exporter_test.sh
against the C++ `tdp` (the package built the way `pip install ./sdk/python` builds it)."""

def python_exporter_test(name, size = "large", data = [], extension = False):
    """`name`.py, run with the venv's python, the package on PYTHONPATH and TDP_BIN set.

    size "large" (900 s): each case runs tdp, and a loaded 2-core CI machine is slow.
    data: other files the test reads (a module it imports from). export_case.py, the exporter
        tests' shared base class, is always there.
    extension: the package gets its compiled half, tdpolicy._C (//sdk/python:_C.so).
    """
    native.sh_test(
        name = name,
        size = size,
        srcs = ["exporter_test.sh"],
        args = [
            "$(rootpath @python_venv//:python3)",
            "$(rootpath //sdk/cli:tdp)",
            "$(rootpath :%s.py)" % name,
        ] + (["$(rootpath //sdk/python:_C.so)"] if extension else []),
        data = [
            name + ".py",
            "export_case.py",
            "junit_runner.py",
            "//proto:proto_files",
            "//sdk/cli:tdp",
            "//sdk/python:package_files",
            "@python_venv//:python3",
        ] + data + (["//sdk/python:_C.so"] if extension else []),
    )

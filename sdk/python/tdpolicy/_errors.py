"""The package's exceptions."""


class ExportError(ValueError):
    """A module, setting or example that a tdpolicy.PolicySpec cannot express.

    The message names the submodule's path in the exported tree (``actor.module.0.module``), its
    type, and what the spec expects there."""

    def __init__(self, path, obj, why):
        self.path = path
        self.type = type(obj)
        super().__init__("cannot export %s (%s.%s): %s"
                         % (path, type(obj).__module__, type(obj).__qualname__, why))


class CheckError(AssertionError):
    """The C++ policy and the Python module disagree; ``report`` holds the per-key comparison."""

    def __init__(self, message, report=None):
        super().__init__(message)
        self.report = report

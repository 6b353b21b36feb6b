"""tdpolicy.check: runs a spec through the C++ `tdp` command and compares it with Python, key by key.

Three comparisons, each through the C++ binary a deployment uses (`//sdk/cli:tdp`), in one
`tdp run --self_tests` (each `tdp` start loads LibTorch):
  1. the spec loads and its own self tests (recorded by export) pass, as `tdp validate` checks;
  2. the log-probs of given actions on `td`: when `td` holds entries at the module's sample keys,
     a self test built from `td` joins them, on a temporary copy of the spec;
  3. the run on `td`'s inputs (`--interaction=deterministic` by default): every entry of the C++
     output TensorDict against the Python module's output on the same inputs (the same key set,
     shapes and values to atol + rtol * |python|). When the self tests fail, a second `tdp run`
     without them still compares the outputs.
"""

import json
import math
import os
import shutil
import subprocess
import tempfile

import torch
from tensordict import TensorDict
from tensordict.nn import InteractionType, ProbabilisticTensorDictModule, set_interaction_type
from tensordict.utils import unravel_key

from tdpolicy._errors import CheckError
from tdpolicy._export import _example_td, _plan_transforms, make_self_test, spec_format
from tdpolicy._proto import json_format, spec_pb2, text_format
from tdpolicy._tensors import key_text, leaves, parse_key


def find_tdp(tdp=None):
    """The `tdp` binary: the argument, else $TDP_BIN, else `tdp` on PATH."""
    candidate = tdp or os.environ.get("TDP_BIN") or shutil.which("tdp")
    if not candidate:
        raise FileNotFoundError("the C++ `tdp` command was not found: pass tdp=PATH, set TDP_BIN, or put it on "
                                "PATH (build it with ./bazelw build //sdk/cli:tdp: bazel-bin/sdk/cli/tdp)")
    if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
        raise FileNotFoundError("%s: not an executable file (the `tdp` binary of //sdk/cli:tdp)" % candidate)
    return candidate


def read_spec(path):
    fmt = spec_format(path)
    spec = spec_pb2.PolicySpec()
    with open(path, "rb") as f:
        data = f.read()
    if fmt == "text":
        text_format.Parse(data.decode(), spec)
    elif fmt == "json":
        json_format.Parse(data.decode(), spec)
    else:
        spec.ParseFromString(data)
    return spec


class CheckReport:
    """The per-key comparison of one check: `entries` is a list of (key, status, detail) with
    status "ok", "mismatch" or "skipped" (nothing to compare: Python's module cannot compute the
    value, as TorchRL's TanhNormal has no mean); `steps` the tdp commands run and how they ended."""

    def __init__(self, path):
        self.path = path
        self.entries = []
        self.steps = []

    @property
    def ok(self):
        """Nothing differs (skipped entries compare nothing, see skipped())."""
        return (all(status in ("ok", "skipped") for _, status, _ in self.entries)
                and all(ok for _, ok, _ in self.steps))

    def mismatches(self):
        return [e for e in self.entries if e[1] == "mismatch"]

    def skipped(self):
        return [e for e in self.entries if e[1] == "skipped"]

    def __str__(self):
        lines = ["tdpolicy.check %s: %s" % (self.path, "OK" if self.ok else "MISMATCH")]
        for command, ok, detail in self.steps:
            lines.append("  %-4s %s%s" % ("ok" if ok else "FAIL", command, "" if ok else ": " + detail))
        for key, status, detail in self.entries:
            lines.append("  %-4s %s: %s" % ({"ok": "ok", "skipped": "SKIP"}.get(status, "FAIL"), key, detail))
        return "\n".join(lines)

    __repr__ = __str__


def _to_json_value(tensor):
    def fix(v):
        if isinstance(v, list):
            return [fix(x) for x in v]
        if isinstance(v, float) and not math.isfinite(v):
            return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        return v
    return fix(tensor.detach().cpu().tolist())


def _from_json_value(value):
    def fix(v):
        if isinstance(v, list):
            return [fix(x) for x in v]
        if isinstance(v, str):
            return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[v]
        return v
    return torch.tensor(fix(value), dtype=torch.float64)


def input_document(entries):
    """`tdp run --input`'s JSON document for (key, tensor) pairs: a nested key as nested objects,
    non-finite values as the strings protobuf's JSON reads ("NaN", "Infinity", "-Infinity")."""
    document = {}
    for key, value in entries:
        parts = (key,) if isinstance(key, str) else key
        level = document
        for part in parts[:-1]:
            level = level.setdefault(part, {})
        level[parts[-1]] = _to_json_value(value)
    return document


def output_entries(stdout):
    """`tdp run`'s output (a JSON TensorDict) as {key: float64 tensor}, a nested key as a tuple."""
    return {k: _from_json_value(v) for k, v in _flatten(json.loads(stdout)).items()}


def _flatten(obj, prefix=()):
    out = {}
    for name, value in obj.items():
        key = prefix + (name,)
        if isinstance(value, dict):
            out.update(_flatten(value, key))
        else:
            out[key[0] if len(key) == 1 else key] = value
    return out


def _run(command, report, label):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ok = result.returncode == 0
    report.steps.append((label, ok, (result.stderr.strip() or "exit status %d" % result.returncode)))
    return result


def _compare(key, got, want, atol, rtol):
    if want.is_floating_point():
        # tdp prints the shortest decimal that reads back to the same bits of the tensor's dtype:
        # read it back in that dtype.
        got = got.to(want.dtype).to(torch.float64)
    if tuple(got.shape) != tuple(want.shape):
        return "mismatch", "C++ shape %s, Python shape %s" % (list(got.shape), list(want.shape))
    want64 = want.detach().to(torch.float64)
    if want64.numel() == 0:
        return "ok", "empty"
    if not torch.allclose(got, want64, atol=atol, rtol=rtol, equal_nan=True):
        worst = (got - want64).abs().nan_to_num(nan=math.inf).max().item()
        return "mismatch", "differs by up to %.3g (atol %g, rtol %g)" % (worst, atol, rtol)
    worst = (got - want64).abs().nan_to_num(nan=0.0).max().item()
    return "ok", "shape %s, max |C++ - Python| %.3g" % (list(want.shape), worst)


def _sample_keys(module):
    keys = []
    for sub in module.modules():
        if isinstance(sub, ProbabilisticTensorDictModule):
            keys.extend(unravel_key(k) for k in sub.dist_sample_keys)
    return keys


def _self_tested_spec(path, spec, module, td, input_td, atol, rtol):
    """check's steps 1 and 2: (the spec file `tdp run --self_tests` runs, what the report calls its
    self tests). When td holds actions at the module's sample keys, that file is a temporary copy
    (the caller deletes it) with one more self test, their log-probs; it lies in the spec's folder,
    so that its parameters_file and TorchScript files resolve."""
    actions = [k for k in _sample_keys(module) if k in td.keys(True, True)]
    if not actions:
        return path, "its self tests"
    was_training = module.training
    module.eval()
    try:
        output_keys = [parse_key(k) for k in spec.output_keys]
        test = make_self_test(module, input_td, td.select(*actions), output_keys, atol, rtol)
    finally:
        module.train(was_training)
    copy = spec_pb2.PolicySpec()
    copy.CopyFrom(spec)
    copy.self_tests.add().CopyFrom(test)
    folder = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".tdpolicy-check-", suffix=".pb", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(copy.SerializeToString(deterministic=True))
    except BaseException:
        os.unlink(temporary)
        raise
    return temporary, "its self tests and the log-probs of td's %s" % ", ".join(key_text(k) for k in actions)


_INTERACTIONS = {"deterministic": InteractionType.DETERMINISTIC, "mode": InteractionType.MODE,
                 "mean": InteractionType.MEAN, "median": InteractionType.MEDIAN}


def check(path, module, td, *, transforms=None, tdp=None, atol=1e-6, rtol=1e-6, backend="libtorch",
          interaction="deterministic", self_tests=True, raise_on_mismatch=True):
    """Compares the spec at `path`, run by the C++ `tdp`, with `module` run by Python on `td`.

    transforms: the environment transforms the spec was exported with (export's `transforms`);
        `td` then holds the raw environment output, and Python runs the transforms before the
        module (the C++ output also holds the raw inputs a transform replaced elsewhere; they
        are compared as given).
    tdp: the `tdp` binary (default: $TDP_BIN, else `tdp` on PATH).
    backend: tdp's --backend for the run: "libtorch" (default; the reference path, which computes
        what PyTorch does op for op), "auto" (what an Actor runs: the fused CPU plan at small
        batches, equal to LibTorch to 1e-5) or "fused".
    interaction: the interaction type both sides run under: deterministic (default), mode, mean,
        median, or None for each probabilistic module's own default_interaction_type (which must
        not be random: random draws are not compared).
    self_tests: run steps 1 and 2 (the default); False runs step 3 alone, as for a file already
        checked on another backend (the self tests run on LibTorch whatever `backend` says).
    Returns a CheckReport (per key: ok, or what differs); raises CheckError carrying it when
    anything differs, unless raise_on_mismatch=False."""
    td = _example_td(td, "td")
    if transforms is not None:
        module = _plan_transforms(transforms, module, td)
    if interaction is not None and interaction not in _INTERACTIONS:
        raise ValueError("interaction=%r: expected one of %s or None (random draws are not compared)"
                         % (interaction, ", ".join(_INTERACTIONS)))
    if interaction is None:
        for name, sub in module.named_modules():
            if (isinstance(sub, ProbabilisticTensorDictModule)
                    and InteractionType(sub.default_interaction_type) == InteractionType.RANDOM):
                raise ValueError("interaction=None: %s (%s) samples by default (RANDOM), and random draws "
                                 "are not compared; pass an interaction type"
                                 % ("actor." + name if name else "actor", type(sub).__name__))
    binary = find_tdp(tdp)
    report = CheckReport(path)
    spec = read_spec(path)

    inputs = {}
    for entry in spec.inputs:
        key = parse_key(entry.key)
        if key in td.keys(True, True):
            inputs[key] = td.get(key)
    if not inputs and len(spec.inputs):
        raise ValueError("td holds none of the spec's inputs (%s)" % ", ".join(e.key for e in spec.inputs))
    input_td = TensorDict(inputs, batch_size=td.batch_size)

    # 1, 2 and 3 in one `tdp run --self_tests`; a second run without the self tests when it fails,
    # so that the report still says which outputs differ.
    flags = ["--lp_aggregate=false", "--backend=" + backend]
    if interaction is not None:
        flags.append("--interaction=" + interaction)
    label = "tdp run %s %s" % (os.path.basename(path), " ".join(flags))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(input_document(inputs.items()), f)
        input_path = f.name
    tested_path = path
    try:
        if self_tests:
            tested_path, tests = _self_tested_spec(path, spec, module, td, input_td, atol, rtol)
            result = _run([binary, "run", tested_path, "--input=" + input_path, "--self_tests"] + flags, report,
                          "%s --self_tests (%s)" % (label, tests))
        if not self_tests or result.returncode != 0:
            result = _run([binary, "run", path, "--input=" + input_path] + flags, report, label)
    finally:
        os.unlink(input_path)
        if tested_path != path:
            os.unlink(tested_path)
    if result.returncode == 0:
        cpp = output_entries(result.stdout)
        was_training = module.training
        module.eval()
        python_error = None
        try:
            with torch.no_grad(), set_interaction_type(_INTERACTIONS.get(interaction)):
                python_out = module(input_td.clone())
        except (NotImplementedError, AttributeError, RuntimeError) as error:
            # A distribution without this value in Python (TorchRL's TanhNormal has no mean, its
            # TanhDelta no closed-form mean): nothing to compare the C++ output with.
            python_error = error
        finally:
            module.train(was_training)
        if python_error is not None:
            for key in sorted(cpp, key=lambda k: key_text(k)):
                report.entries.append((key_text(key), "skipped", "Python's module raised %s under interaction=%s "
                                       "(%s); C++ computed a value, not compared"
                                       % (type(python_error).__name__, interaction, python_error)))
            if raise_on_mismatch and not report.ok:
                raise CheckError(str(report), report)
            return report
        python = dict(leaves(python_out))
        for key in sorted(set(cpp) | set(python), key=lambda k: key_text(k)):
            name = key_text(key)
            if key not in cpp:
                report.entries.append((name, "mismatch", "written by Python, not by C++"))
            elif key not in python:
                report.entries.append((name, "mismatch", "written by C++, not by Python"))
            else:
                status, detail = _compare(key, cpp[key], python[key], atol, rtol)
                report.entries.append((name, status, detail))
    if raise_on_mismatch and not report.ok:
        raise CheckError(str(report), report)
    return report

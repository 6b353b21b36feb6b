"""The AOTInductor fallback on a GPU: a user's own network inside a TorchRL ProbabilisticActor,
exported with tdpolicy.export(..., fallback="aoti", aoti_device="cuda", self_test=False) (nvcc and
Triton compile the .pt2 package on this machine), then run by the C++ `tdp` on the GPU and compared
with the same actor run by Python on the GPU.

    python3 tests/gpu/aoti_cuda_check.py --device cuda --tdp tests/gpu/bundle/bin/tdp   # GPU machine
    python3 tests/gpu/aoti_cuda_check.py --device cpu --tdp bazel-bin/sdk/cli/tdp       # anywhere

The actor is tests/python/torchrl_aoti_test.py's (GatedResidual: a gate, a residual and a buffer
no tdpolicy.Network kind expresses, under NormalParamExtractor and a TanhNormal). What is checked,
at batch sizes [1], [6] (the export's), [64] and [2, 3] (leading batch dims flattened into the
package's one):
  - the spec names the package, its device and its SHA-256; `tdp validate` (which builds a CPU
    actor) loads a CPU package and refuses a CUDA one with the error below;
  - `tdp run --device=DEVICE --interaction=deterministic`: every output entry (params, loc, scale,
    action, action_log_prob) against Python's on the same device, to 1e-5;
  - log-probs of given actions: `tdp run --interaction=random` draws actions away from the mode,
    and Python scores those actions (tensordict's log_prob with the actions given, as the spec's
    self tests do) on the same device, to 1e-5;
  - a spec whose package device is not the one the package was compiled for is a load error
    naming the file;
  - the package refuses to run on an actor of the other device with a clear error naming the
    file: a CUDA package on a CPU actor; a CPU package on a CUDA actor (where a GPU is visible:
    without one, `tdp` refuses the CUDA actor before it reaches the package, and the step says
    it is skipped).
A CUDA package cannot carry a self test (`tdp validate` runs those on the CPU), so this script is
where a CUDA package's numbers are checked. With --device cpu it runs the same steps on a CPU
package, so its logic is exercised on any machine (CI's own check of CPU packages is
tests/python/torchrl_aoti_test.py, through tdpolicy.check).

Exit status 0 when every check passed; 1 with the failures listed. Needs torch, tensordict,
TorchRL, protobuf and the tdpolicy package (tests/gpu/bundle.sh packs the last four for the GPU
machine; gpu_check.sh puts them on PYTHONPATH).
"""

import argparse
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCHES = ([1], [6], [64], [2, 3])
TOLERANCE = 1e-5  # atol and rtol: Inductor's kernels against eager ones, on either device


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), required=True,
                        help="the package's device (export's aoti_device) and the actor's")
    parser.add_argument("--tdp", required=True, help="the C++ tdp binary (a --config=cuda build for --device cuda)")
    parser.add_argument("--workdir", default=None, help="where the spec and package are written (default: a "
                        "temporary folder, removed at the end)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    started = time.monotonic()

    import torch
    from tensordict import TensorDict
    from tensordict.nn import InteractionType, set_interaction_type

    import tdpolicy
    from tdpolicy._check import _compare, _to_json_value, output_entries, read_spec
    from tdpolicy._export import _score
    from tdpolicy._proto import text_format
    from tdpolicy._tensors import key_text, leaves

    sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "python"))
    from torchrl_aoti_test import GatedResidual, gaussian_actor

    if args.device == "cuda" and not torch.cuda.is_available():
        print("aoti_cuda_check: --device cuda, but torch %s sees no GPU" % torch.__version__)
        return 1
    tdp = tdpolicy.find_tdp(args.tdp)
    actor_device = "cuda:0" if args.device == "cuda" else "cpu"
    other_device = "cpu" if args.device == "cuda" else "cuda:0"
    print("aoti_cuda_check: torch %s, device %s%s, tdp %s" % (
        torch.__version__, actor_device,
        " (%s)" % torch.cuda.get_device_name(0) if args.device == "cuda" else "", tdp))

    failures = []

    def expect(ok, what):
        print("  %-4s %s" % ("ok" if ok else "FAIL", what))
        if not ok:
            failures.append(what)
        return ok

    def run_tdp(*command):
        return subprocess.run([tdp] + list(command), capture_output=True, text=True, timeout=120)

    workdir = args.workdir or tempfile.mkdtemp(prefix="aoti_cuda_check_")
    os.makedirs(workdir, exist_ok=True)
    try:
        torch.manual_seed(0)
        actor = gaussian_actor(GatedResidual(5, 16, 4)).eval()
        example = TensorDict({"observation": torch.randn(6, 5)}, [6])
        path = os.path.join(workdir, "gated_%s.pbtxt" % args.device)

        # 1. Export: the package compiled for the device (nvcc for CUDA), no self test for it.
        start = time.monotonic()
        spec = tdpolicy.export(actor, path, example=example, fallback="aoti", aoti_device=args.device,
                               self_test=False)
        print("export with fallback=\"aoti\", aoti_device=%r: %.1f s" % (args.device, time.monotonic() - start))
        network = spec.module.probabilistic_sequential.modules[0].sequential.modules[0].network
        package = network.network.aoti_package
        package_path = os.path.join(workdir, package.file)
        with open(package_path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        expect(package.device == args.device and package.sha256 == digest,
               "spec: aoti_package %s, device %r, SHA-256 of the file" % (package.file, package.device))
        expect(len(read_spec(path).self_tests) == 0 and len(spec.parameters.tensors) == 0,
               "spec: no self test, the network's weights inside the package")
        # `tdp validate` builds a CPU actor: a CPU package loads; a CUDA package "loads on a CUDA
        # actor only" (export's aoti_device), and refuses the CPU one naming the file.
        validated = run_tdp("validate", path)
        if args.device == "cpu":
            expect(validated.returncode == 0, "tdp validate %s%s" % (
                os.path.basename(path), "" if validated.returncode == 0 else ": " + validated.stderr.strip()))
        else:
            wanted = "%s: the package was compiled for cuda and cannot move to cpu" % package.file
            expect(validated.returncode == 1 and wanted in validated.stderr,
                   "tdp validate %s (a CPU actor): exit %d, %r" % (
                       os.path.basename(path), validated.returncode, validated.stderr.strip()))

        python_actor = copy.deepcopy(actor).to(actor_device).eval()

        def cpp_run(inputs, interaction, seed=0):
            """tdp run on the actor's device: the output TensorDict as {key: float64 tensor}, or None."""
            with tempfile.NamedTemporaryFile("w", suffix=".json", dir=workdir, delete=False) as f:
                json.dump({"observation": _to_json_value(inputs.get("observation"))}, f)
            start = time.monotonic()
            result = run_tdp("run", path, "--input=" + f.name, "--device=" + actor_device, "--backend=libtorch",
                             "--interaction=" + interaction, "--seed=%d" % seed, "--lp_aggregate=false")
            os.unlink(f.name)
            took = time.monotonic() - start
            if result.returncode != 0:
                expect(False, "tdp run --device=%s --interaction=%s at batch %s: %s" % (
                    actor_device, interaction, list(inputs.batch_size), result.stderr.strip()))
                return None, took
            return output_entries(result.stdout), took

        def compare(what, cpp, python, keys):
            """One line: every key of `keys` to TOLERANCE, the largest difference and where."""
            worst, where, wrong = -1.0, None, []
            for key in keys:
                if key not in cpp or key not in python:
                    wrong.append("%s written by %s only" % (key_text(key), "C++" if key in cpp else "Python"))
                    continue
                status, detail = _compare(key, cpp[key], python[key].cpu(), TOLERANCE, TOLERANCE)
                if status != "ok":
                    wrong.append("%s %s" % (key_text(key), detail))
                    continue
                got = cpp[key].to(python[key].dtype).to(torch.float64)
                difference = (got - python[key].cpu().to(torch.float64)).abs().max().item() if got.numel() else 0.0
                if difference > worst:
                    worst, where = difference, key_text(key)
            summary = "%d entries (%s), max |C++ - Python| %.3g (%s)" % (
                len(keys), ", ".join(key_text(k) for k in keys), worst, where)
            expect(not wrong and bool(keys), "%s: %s" % (what, "; ".join(wrong) if wrong else summary))

        # 2. At each batch size: deterministic outputs, then the log-probs of C++'s random draws.
        torch.manual_seed(1)
        for batch in BATCHES:
            inputs = TensorDict({"observation": torch.randn(*batch, 5)}, batch)
            device_inputs = inputs.to(actor_device)
            cpp, took = cpp_run(inputs, "deterministic")
            with torch.no_grad(), set_interaction_type(InteractionType.DETERMINISTIC):
                python = dict(leaves(python_actor(device_inputs.clone())))
            if cpp is not None:
                compare("deterministic at batch %s (tdp run %.1f s)" % (batch, took), cpp, python,
                        sorted(set(cpp) | set(python), key=key_text))

            drawn, took = cpp_run(inputs, "random", seed=7)
            if drawn is None or cpp is None:
                continue
            action = drawn["action"].to(torch.float32)
            # Given actions away from the mode: otherwise this repeats the deterministic check.
            expect(not torch.allclose(action, cpp["action"].to(torch.float32)) and bool(action.abs().lt(2).all()),
                   "random at batch %s: C++ drew actions inside (-2, 2), not the mode" % batch)
            given = device_inputs.clone().set("action", action.to(actor_device))
            with torch.no_grad(), set_interaction_type(InteractionType.DETERMINISTIC):
                scored = dict(leaves(_score(python_actor, given)))
            compare("log-prob of C++'s random actions at batch %s (tdp run %.1f s)" % (batch, took), drawn, scored,
                    [k for k in scored if key_text(k).endswith("_log_prob")] or ["action_log_prob"])

        # 3. A spec whose package device is not the package's: a load error naming the file.
        lying = read_spec(path)
        lying.module.probabilistic_sequential.modules[0].sequential.modules[0].network.network.aoti_package.device = (
            "cpu" if args.device == "cuda" else "cuda")
        lying_path = os.path.join(workdir, "lying.pbtxt")
        with open(lying_path, "w") as f:
            f.write(text_format.MessageToString(lying))
        refused = run_tdp("validate", lying_path)
        wanted = "%s: the package was compiled for %s, not for %s as the spec's device says" % (
            package.file, args.device, "cpu" if args.device == "cuda" else "cuda")
        expect(refused.returncode == 1 and wanted in refused.stderr,
               "tdp validate on a spec that says device %r for the %s package: exit %d, %r" % (
                   "cpu" if args.device == "cuda" else "cuda", args.device, refused.returncode,
                   refused.stderr.strip()))

        # 4. The package on an actor of the other device: a clear error naming the file, no output.
        if other_device.startswith("cuda") and not torch.cuda.is_available():
            print("  skip tdp run --device=%s on the %s package: no GPU here for a CUDA actor" % (
                other_device, args.device))
        else:
            with tempfile.NamedTemporaryFile("w", suffix=".json", dir=workdir, delete=False) as f:
                json.dump({"observation": _to_json_value(torch.randn(2, 5))}, f)
            refused = run_tdp("run", path, "--input=" + f.name, "--device=" + other_device)
            os.unlink(f.name)
            wanted = "%s: the package was compiled for %s and cannot move to %s" % (
                package.file, args.device, other_device)
            expect(refused.returncode == 1 and wanted in refused.stderr and not refused.stdout,
                   "tdp run --device=%s on the %s package: exit %d, %r" % (
                       other_device, args.device, refused.returncode, refused.stderr.strip()))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)

    print("aoti_cuda_check: %s (%d failure(s), %.0f s)" % (
        "passed" if not failures else "FAILED", len(failures), time.monotonic() - started))
    for failure in failures:
        print("  failed: " + failure)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())

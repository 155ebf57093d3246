"""A trace window asked of a live always-on session (trace windows of 0):
the kernels it traces, launched by PyTorch through the runtime and by
cuBLAS, are joined to their launches and attributed to the program's NVTX
range. Needs torch with a GPU and the `gpuscope` command on PATH; skipped
otherwise."""

import os
import shutil
import subprocess
import time
import unittest

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

import gpuscope


def frames(path):
    return [f["name"] for f in path["frames"]]


@unittest.skipUnless(torch is not None and torch.cuda.is_available(), "needs torch with a GPU")
@unittest.skipUnless(shutil.which("gpuscope"), "needs the gpuscope command on PATH")
class OnDemandWindowTest(unittest.TestCase):
    def test_a_window_asked_of_an_always_on_session_attributes_its_kernels(self):
        x = torch.randn(512, 512, device="cuda")

        def steps(seconds):
            end = time.monotonic() + seconds
            n = 0
            while time.monotonic() < end:
                with torch.cuda.nvtx.range("step"):
                    y = torch.relu(x @ x) + 1.0
                    y.sum()
                n += 1
            torch.cuda.synchronize()
            return n

        steps(0.2)
        with gpuscope.profile(mode="sampling", trace_windows=(0, 1000), strict=True) as prof:
            before = steps(0.3)
            asked = subprocess.run(["gpuscope", "trigger", str(os.getpid()), "--trace", "0.5s"],
                                   capture_output=True, text=True, timeout=30)
            self.assertEqual(asked.returncode, 0, asked.stdout + asked.stderr)
            during = steps(1.0)
        d = prof.report.data
        print(f"steps before {before}, during and after {during}; drops {d.get('drops')}")
        traced = [k for k in d["path_kernels"] if k["launches"] > 0]
        self.assertTrue(traced, "the window traced kernels")
        outside = [(frames(k["path"]), k["name"]) for k in traced if frames(k["path"]) != ["step"]]
        self.assertEqual(outside, [], "every traced kernel is joined to its launch inside `step`")
        names = " ".join(k["name"] for k in traced)
        # One kernel PyTorch launches itself (elementwise) and cuBLAS's GEMM.
        self.assertIn("elementwise", names.lower())
        self.assertTrue(any("gemm" in k["name"].lower() or "sm90" in k["name"] for k in traced), names)
        step = next(r for r in d["ranges"] if frames(r["path"]) == ["step"])
        self.assertGreater(step["kernel_launches"], 0)
        self.assertEqual({k: v for k, v in d["drops"].items() if v}, {}, "nothing dropped or left unjoined")


if __name__ == "__main__":
    unittest.main()

"""Tests of the installed gpuscope wheel: `python -m unittest discover -s
python/tests` in a virtual environment where the wheel is installed. The CPU
tests run anywhere; the GPU tests (PyTorch on an NVIDIA GPU) skip without
one."""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import warnings
from pathlib import Path

import gpuscope
from gpuscope import _native


def driver_present():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


GPU = driver_present()


class Package(unittest.TestCase):
    def test_the_library_and_the_command_are_in_the_package(self):
        self.assertTrue(_native.library_path().is_file(), _native.library_path())
        self.assertTrue(os.access(_native.command_path(), os.X_OK), _native.command_path())
        self.assertEqual(gpuscope.version(), gpuscope.__version__)

    def test_the_config_struct_matches_the_library(self):
        # The library fills the struct: its size and defaults are its own,
        # not values this test set (the field layout: test_header.py).
        cfg = _native.Config()
        _native.check(_native.init_config(cfg))
        self.assertEqual(cfg.struct_size, ctypes.sizeof(_native.Config))
        self.assertEqual((cfg.mode, cfg.launch_count, cfg.keep_trace), (_native.MODES["trace"], 3, 0))
        self.assertEqual((cfg.trace_window_ms, cfg.trace_period_ms, cfg.sampling_interval_us), (0, 0, 0))

    def test_importing_it_makes_it_the_nvtx_tool_unless_one_is_set(self):
        code = "import gpuscope, os; print(os.environ['NVTX_INJECTION64_PATH'])"
        env = {k: v for k, v in os.environ.items() if k != "NVTX_INJECTION64_PATH"}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        self.assertEqual(out.stdout.strip(), str(_native.library_path()))
        env["NVTX_INJECTION64_PATH"] = "/elsewhere/libtool.so"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        self.assertEqual(out.stdout.strip(), "/elsewhere/libtool.so")

    def test_the_library_is_told_the_site_packages_unless_the_user_set_them(self):
        # Where the library looks for CUPTI from NVIDIA's wheels (after the
        # system's places), with no activated environment needed.
        code = "import gpuscope, os; gpuscope._native.lib(); print(os.environ['GPUSCOPE_PYTHON_SITE'])"
        env = {k: v for k, v in os.environ.items() if k not in ("GPUSCOPE_PYTHON_SITE", "VIRTUAL_ENV")}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        sites = out.stdout.strip().split(os.pathsep)
        self.assertIn(str(Path(gpuscope.__file__).resolve().parent.parent), [str(Path(s).resolve()) for s in sites])
        env["GPUSCOPE_PYTHON_SITE"] = "/elsewhere/site-packages"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        self.assertEqual(out.stdout.strip(), "/elsewhere/site-packages")

    def test_the_command_passes_the_site_packages_on(self):
        exe = shutil.which("gpuscope")
        self.assertIsNotNone(exe, "the wheel's gpuscope command is on PATH")
        env = {k: v for k, v in os.environ.items() if k != "GPUSCOPE_PYTHON_SITE"}
        code = "import os; print(os.environ.get('GPUSCOPE_PYTHON_SITE', ''))"
        out = subprocess.run([exe, "run", "--", sys.executable, "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(str(Path(gpuscope.__file__).resolve().parent.parent),
                      [str(Path(s).resolve()) for s in out.stdout.strip().split(os.pathsep) if s])


class BadArguments(unittest.TestCase):
    def test_are_refused_naming_the_value_and_what_is_allowed(self):
        with self.assertRaisesRegex(ValueError, r"'fast'.*allowed: trace, metrics, sampling"):
            gpuscope.profile(mode="fast")
        with self.assertRaisesRegex(ValueError, r"'report.xml'.*\.csv"):
            gpuscope.profile(output="report.xml")
        with self.assertRaisesRegex(ValueError, r"'yaml'.*allowed: table, json"):
            gpuscope.profile(output="r", format="yaml")
        with self.assertRaisesRegex(ValueError, r"trace_windows=100"):
            gpuscope.profile(mode="sampling", trace_windows=100)._config()
        with self.assertRaisesRegex(ValueError, r"launch_count=-1"):
            gpuscope.profile(mode="metrics", launch_count=-1)._config()
        with self.assertRaisesRegex(ValueError, r"device_memory='no'; allowed: True or False"):
            gpuscope.profile(device_memory="no")
        self.assertEqual(gpuscope.profile(device_memory=False)._config().device_memory, 0)
        self.assertEqual(gpuscope.profile()._config().device_memory, 1, "on by default")

    def test_the_library_checks_the_rest_and_its_message_comes_through(self):
        with self.assertRaises(gpuscope.GpuscopeError) as e:
            gpuscope.profile(mode="sampling", trace_windows=(5, 1000)).start()
        self.assertEqual(e.exception.code, _native.ERR_INVALID)
        self.assertIn("10", str(e.exception))


class Ranges(unittest.TestCase):
    def test_a_range_is_a_context_manager_and_a_decorator(self):
        with gpuscope.range("outer") as r:
            self.assertEqual(r.name, "outer")

        @gpuscope.range("forward")
        def forward(x):
            return x * 2

        self.assertEqual(forward(21), 42)
        self.assertEqual(forward.__name__, "forward")


@unittest.skipIf(GPU, "an NVIDIA driver is present")
class WithoutAGpu(unittest.TestCase):
    def test_profile_warns_once_and_the_block_runs_unprofiled(self):
        ran = False
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with gpuscope.profile(output=os.path.join(tempfile.gettempdir(), "never.json")) as p:
                ran = True
        self.assertTrue(ran)
        self.assertIsNone(p.report)
        self.assertFalse(p.profiled)
        self.assertEqual([x.category for x in w], [gpuscope.GpuscopeWarning])
        self.assertIn("driver", str(w[0].message))
        self.assertIn("driver", p.reason)

    def test_the_readme_example_runs_when_nothing_is_profiled(self):
        # The README's Python example, as a user pastes it.
        readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
        code = readme.split("```python\n", 1)[1].split("```", 1)[0]
        code = code.replace("for batch in loader:", "for batch in range(2):").replace("train_step(batch)", "pass")
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run([sys.executable, "-c", code], cwd=d, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("not profiled", out.stdout + out.stderr)

    def test_strict_raises(self):
        with self.assertRaises(gpuscope.GpuscopeError) as e:
            with gpuscope.profile(strict=True):
                pass
        self.assertEqual(e.exception.code, _native.ERR_NO_GPU)

    def test_the_command_says_there_is_no_driver_and_passes_the_exit_code(self):
        exe = shutil.which("gpuscope")
        self.assertIsNotNone(exe, "the wheel's gpuscope command is on PATH")
        out = subprocess.run([exe, "run", "--", sys.executable, "-c", "import sys; print('ran'); sys.exit(3)"],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 3)
        self.assertEqual(out.stdout, "ran\n")
        self.assertIn("no NVIDIA driver found", out.stderr)


@unittest.skipUnless(torch_cuda(), "needs PyTorch on an NVIDIA GPU")
class OnAGpu(unittest.TestCase):
    def test_a_torch_loop_is_profiled_with_its_nvtx_ranges(self):
        torch = torch_cuda()
        model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(256, 512, device="cuda")
        out = tempfile.mkdtemp()
        with gpuscope.profile(mode="trace", output=os.path.join(out, "r.json")) as p:
            for _ in range(20):
                with gpuscope.range("step"):
                    torch.cuda.nvtx.range_push("forward")
                    loss = model(x).square().mean()
                    torch.cuda.nvtx.range_pop()
                    loss.backward()
                    opt.step()
                    opt.zero_grad()
            torch.cuda.synchronize()
        r = p.report
        self.assertIsNotNone(r)
        paths = {"/".join(f["name"] for f in g["path"]["frames"]): g for g in r.data["ranges"]}
        self.assertEqual(paths["step"]["count"], 20)
        self.assertEqual(paths["step/forward"]["count"], 20)
        self.assertGreater(paths["step/forward"]["kernel_launches"], 0)
        self.assertIn("step/forward", r.table())
        with open(os.path.join(out, "r.json")) as f:
            self.assertEqual(json.load(f)["ranges"], r.data["ranges"])
        for name in ("r.csv", "r.chrome.json", "r.prom"):
            r.write(os.path.join(out, name))
            self.assertGreater(os.path.getsize(os.path.join(out, name)), 0, name)
        print(r.table())


if __name__ == "__main__":
    unittest.main()

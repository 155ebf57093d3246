"""join.py on small ncu CSVs and gpuscope reports written here (no GPU).

    python3 -m unittest discover -s bench/metrics
"""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import join  # noqa: E402

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')
NCU_NAME = ("void unnamed>::multi_tensor_apply_kernel<unnamed>::TensorListMetadata<1>, "
            "unnamed>::BinaryOpScalarFunctor<float, 1, 1, 0>, std::multiplies<float>, float>(T1, T2, T3...)")
OUR_NAME = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
            "TensorListMetadata<1>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, 1, 1, 0>, "
            "std::multiplies<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<1>, float)")


def ncu_csv(rows):
    """rows: (id, name, grid, us, occ, eff)."""
    out = ["==PROF== Connected to process 1", HEAD]
    for i, name, grid, us, occ, eff in rows:
        for metric, unit, v in (("gpu__time_duration.sum", "us", us), (join.OCC, "%", occ), (join.EFF, "%", eff)):
            out.append(f'"{i}","1","python3","h","{name}","1","7","(512, 1, 1)","({grid}, 1, 1)","0","9.0",'
                       f'"Command line profiler metrics","{metric}","{unit}","{v}"')
    return "\n".join(out) + "\n"


def report(launches):
    """launches: (name, grid, occ, eff) in launch order; occ None: not measured."""
    ks = []
    for i, (name, grid, occ, eff) in enumerate(launches):
        m = None if occ is None else {"achieved_occupancy_pct": occ, "sm_efficiency_pct": eff,
                                      "duration_ns": 40e3, "sm_cycles_elapsed": 1.0, "values": {}}
        ks.append({"name": name, "correlation_id": 10 + i, "start_ns": 0, "end_ns": 40000,
                   "grid": [grid, 1, 1], "block": [512, 1, 1], "metrics": m})
    return json.dumps({"metrics": {"profiled_launches": len(ks)}, "trace": {"kernels": ks}})


class Join(unittest.TestCase):
    def run_join(self, ncu, ours, *extra):
        with tempfile.TemporaryDirectory() as d:
            args = ["join.py"]
            for i, text in enumerate(ncu):
                with open(f"{d}/n{i}.csv", "w") as f:
                    f.write(text)
                args += ["--ncu", f"n{i}={d}/n{i}.csv"]
            with open(f"{d}/r.json", "w") as f:
                f.write(ours)
            args += ["--ours", f"gs={d}/r.json", *extra]
            out = io.StringIO()
            old = sys.argv
            sys.argv = args
            try:
                with contextlib.redirect_stdout(out):
                    rc = join.main()
            finally:
                sys.argv = old
            return rc, out.getvalue()

    def test_ncu_and_demangled_names_have_one_base(self):
        self.assertEqual(join.base(NCU_NAME), "multi_tensor_apply_kernel")
        self.assertEqual(join.base(OUR_NAME), "multi_tensor_apply_kernel")
        self.assertEqual(join.base("void <unnamed>::k<float>(float*)"), "k")

    def test_launches_join_by_grid_and_rank_not_by_position(self):
        # ncu lists the 7-block remainder first; gpuscope the 231-block
        # launch first: each joins its own kind.
        ncu = ncu_csv([(0, NCU_NAME, 7, 23.0, 23.8, 2.8), (1, NCU_NAME, 231, 41.0, 36.3, 84.7)])
        ours = report([(OUR_NAME, 231, 36.5, 85.0), (OUR_NAME, 7, 23.9, 2.8)])
        rc, out = self.run_join([ncu], ours)
        self.assertEqual(rc, 0, out)
        self.assertIn("2 joined", out)
        self.assertIn("kernels off by over 2 points on the mean: 0", out)

    def test_a_kernel_off_on_the_mean_fails_and_shows_the_rerun(self):
        ncu = ncu_csv([(0, NCU_NAME, 231, 41.0, 36.3, 84.7), (1, NCU_NAME, 231, 41.0, 36.3, 84.7)])
        again = ncu_csv([(0, NCU_NAME, 231, 41.0, 36.4, 85.0), (1, NCU_NAME, 231, 41.0, 36.2, 84.1)])
        ours = report([(OUR_NAME, 231, 36.3, 88.7), (OUR_NAME, 231, 36.3, 87.7)])
        rc, out = self.run_join([ncu, again], ours)
        self.assertEqual(rc, 1, out)
        self.assertIn("eff +3.50; n1 - n0: occ +0.00, eff -0.15", out)

    def test_short_and_unmeasured_launches_are_not_judged(self):
        ncu = ncu_csv([(0, NCU_NAME, 231, 4.0, 36.3, 84.7), (1, NCU_NAME, 231, 41.0, 36.3, 84.7)])
        ours = report([(OUR_NAME, 231, 10.0, 10.0), (OUR_NAME, 231, None, None)])
        rc, out = self.run_join([ncu], ours)
        self.assertEqual(rc, 0, out)
        self.assertIn("kernels (name and grid): 0", out)

    def test_a_report_without_launch_records_is_refused(self):
        with self.assertRaises(SystemExit) as e:
            self.run_join([ncu_csv([])], json.dumps({"trace": {"kernels": []}}))
        self.assertIn("--trace N", str(e.exception))


if __name__ == "__main__":
    unittest.main()

"""The PyTorch hooks' logic on CPU, with a small model and a recording
backend in place of gpuscope's library: which ranges open, in what order,
nested how, and the FLOPs counted. Skipped where torch is not installed."""

import threading
import time
import unittest

try:
    import torch
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint
except ImportError:  # pragma: no cover
    torch = None

from gpuscope import _torch_ranges as tr


class Recorder:
    """Records what the hooks ask of the library. Paths are built as the
    library builds them: per thread, a follower range on a thread with no
    range of its own nests under the main thread's ranges."""

    def __init__(self):
        self.main = threading.main_thread().ident
        self.stacks = {}
        self.events = []  # (kind, path, value)

    def _path(self, tid):
        own = self.stacks.get(tid, [])
        if tid != self.main and own and own[0][1]:
            return [n for n, _ in self.stacks.get(self.main, [])] + [n for n, _ in own]
        return [n for n, _ in own]

    def enter(self, name, flags):
        follow = bool(flags & tr.FOLLOW)
        tid = threading.get_ident()
        self.stacks.setdefault(tid, []).append((name.decode(), follow))
        self.events.append(("enter", "/".join(self._path(tid)), follow))

    def exit(self, flags):
        discard = bool(flags & tr.DISCARD)
        tid = threading.get_ident()
        path = "/".join(self._path(tid))
        self.stacks[tid].pop()
        self.events.append(("exit", path, discard))

    def flops(self, f):
        self.events.append(("flops", "/".join(self._path(threading.get_ident())), f))

    def cost(self, ns):
        self.events.append(("cost", "/".join(self._path(threading.get_ident())), ns))

    def memory(self, at, allocated, reserved, peak):
        self.events.append(("memory", "/".join(self._path(threading.get_ident())), (at, allocated, reserved, peak)))

    def entered(self):
        return [p for k, p, _ in self.events if k == "enter"]

    def steps(self):
        """The events of each step not discarded, step by step."""
        out, cur = [], None
        for e in self.events:
            if e[0] == "enter" and e[1] == "step":
                cur = []
                out.append(cur)
            if cur is not None:
                cur.append(e)
            if e[:3] == ("exit", "step", True):
                out.pop()
                cur = None
        return out


if torch is not None:

    class Block(nn.Module):
        def __init__(self, d, ckpt=None):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.attn = nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
            self.ckpt = ckpt

        def inner(self, x):
            x = x + self.attn(self.norm(x))
            return x + self.mlp(x)

        def forward(self, x):
            if self.ckpt is None:
                return self.inner(x)
            return checkpoint(self.inner, x, use_reentrant=self.ckpt == "reentrant")

    class Model(nn.Module):
        def __init__(self, d=16, n=2, ckpt=None):
            super().__init__()
            self.embed = nn.Embedding(32, d)
            self.blocks = nn.ModuleList(Block(d, ckpt) for _ in range(n))
            self.head = nn.Linear(d, 32)

        def forward(self, ids):
            x = self.embed(ids)
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    class Wrapper(nn.Module):
        def __init__(self, **kw):
            super().__init__()
            self.model = Model(**kw)

        def forward(self, ids):
            return self.model(ids)


@unittest.skipIf(torch is None, "torch is not installed")
class TorchRanges(unittest.TestCase):
    def train(self, model, steps=4, depth=None, discover=True, batch=2, seq=8):
        rec = Recorder()
        hooks = tr.TorchRanges(rec, depth=depth)
        hooks.install(discover=discover)
        if not discover:
            hooks.annotate(model)
        try:
            data = torch.utils.data.TensorDataset(torch.randint(0, 32, (batch * steps, seq)))
            loader = torch.utils.data.DataLoader(data, batch_size=batch)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            for (ids,) in loader:
                logits = model(ids)
                loss = nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten())
                loss.backward()
                opt.step()
                opt.zero_grad()
            hooks.close_step()
        finally:
            hooks.uninstall()
        return rec, hooks

    def steps_under(self, shape, discover=True):
        """The hooks' `step` ranges over 4 steps of a loop with a range of
        its own shaped `shape`: "step" (opened each step, closed after the
        optimizer), "loop" (one around the loop), "forward" (around the
        forward only), "none"; and the entered ranges. Without `discover`
        no forward hook runs (as in a compiled forward)."""
        torch.manual_seed(0)
        model = Model()
        rec = Recorder()
        program = {"id": 0, "next": 1}

        def opens():
            program["id"], program["next"] = program["next"], program["next"] + 1

        def closes():
            program["id"] = 0

        rec.program_range = lambda: program["id"]
        hooks = tr.TorchRanges(rec)
        hooks.install(discover=discover)
        try:
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            ids = torch.randint(0, 32, (2, 8))
            if shape == "loop":
                opens()
            for _ in range(4):
                if shape in ("step", "forward"):
                    opens()
                loss = model(ids).sum()
                if shape == "forward":
                    closes()
                loss.backward()
                opt.step()
                opt.zero_grad()
                if shape == "step":
                    closes()
            hooks.close_step()
        finally:
            hooks.uninstall()
        opened = sum(1 for k, p, _ in rec.events if k == "enter")
        closed = sum(1 for k, p, _ in rec.events if k == "exit")
        self.assertEqual(opened, closed, "every range opened is closed")
        return [p for p in rec.entered() if p == "step"], rec.entered()

    def test_a_range_the_program_opens_every_step_is_the_step(self):
        steps, entered = self.steps_under("step")
        # The first step tells that the program's range spans it.
        self.assertEqual(steps, ["step"], "the program's range is the step: no step over it")
        self.assertIn("forward", entered)
        self.assertIn("optimizer", entered)

    def test_a_range_around_the_loop_or_the_forward_only_is_not_the_step(self):
        for shape in ("loop", "forward"):
            steps, entered = self.steps_under(shape)
            self.assertEqual(steps, ["step"] * 4, (shape, entered))

    def test_a_backward_after_the_optimizer_step_begins_a_new_step(self):
        # A compiled forward runs no hook: the step must not stay open past
        # the next backward.
        steps, _ = self.steps_under("none", discover=False)
        self.assertEqual(steps, ["step"] * 4)

    def test_a_training_loop_gets_step_data_forward_backward_per_module_and_optimizer(self):
        torch.manual_seed(0)
        rec, _ = self.train(Model())
        steps = rec.steps()
        self.assertEqual(len(steps), 4, "one step per optimizer step")
        first = [p for k, p, _ in steps[0] if k == "enter"]
        # Modules are found at the first call: their ranges start with the next.
        self.assertEqual(first, ["step", "step/data", "step/backward", "step/optimizer"])
        last = [p for k, p, _ in steps[-1] if k == "enter"]
        self.assertEqual(last[:5], ["step", "step/data", "step/forward", "step/forward/blocks.0",
                                    "step/forward/blocks.0/attn"])
        # Norms and embedding lookups get no range of their own.
        self.assertFalse(any(p.endswith(("/norm", "/embed")) for p in last), last)
        for p in ["step/forward/blocks.1/attn", "step/forward/blocks.1/mlp", "step/forward/head",
                  "step/backward/head", "step/backward/blocks.1", "step/backward/blocks.1/mlp",
                  "step/backward/blocks.0/attn", "step/optimizer"]:
            self.assertIn(p, last)
        # Backward visits the modules in reverse.
        bwd = [p for p in last if p.startswith("step/backward/") and p.count("/") == 2]
        self.assertEqual(bwd, ["step/backward/head", "step/backward/blocks.1", "step/backward/blocks.0"])
        self.assertLess(last.index("step/backward/blocks.1/mlp"), last.index("step/backward/blocks.1/attn"))
        # Every range closes, the step last.
        enters = sum(1 for e in rec.events if e[0] == "enter")
        self.assertEqual(enters, sum(1 for e in rec.events if e[0] == "exit"))
        self.assertEqual(rec.events[-1][:2], ("exit", "step"))

    def test_the_caching_allocators_figures_go_with_the_bounds_of_step_forward_backward_and_optimizer(self):
        from unittest import mock

        torch.manual_seed(0)
        calls = []

        def stats(device):
            calls.append(device)
            n = len(calls)
            return {"allocated_bytes": {"all": {"current": 100 * n, "peak": 1000 + n}},
                    "reserved_bytes": {"all": {"current": 5000}}}

        def run(sample):
            rec = Recorder()
            hooks = tr.TorchRanges(rec)
            hooks.install()
            hooks._memory_stats = stats
            hooks.sample_memory = sample
            with mock.patch.object(torch.cuda, "is_initialized", return_value=True), \
                    mock.patch.object(torch.cuda, "current_device", return_value=0):
                try:
                    model, opt = Model(), None
                    opt = torch.optim.SGD(model.parameters(), lr=0.01)
                    for _ in range(3):
                        model(torch.randint(0, 32, (2, 8))).sum().backward()
                        opt.step()
                    hooks.close_step()
                    run.unsent = sum(hooks._cost.values())
                finally:
                    hooks.uninstall()
            return rec

        rec = run(True)
        mem = [(p, e[0]) for k, p, e in rec.events if k == "memory"]
        step = [(p, at) for p, at in mem[-8:]]
        self.assertEqual(step, [("step", 0), ("step/forward", 0), ("step/forward", 1), ("step/backward", 0),
                                ("step/backward", 1), ("step/optimizer", 0), ("step/optimizer", 1), ("step", 1)],
                         "at each bound, inside the range")
        first = next(e for k, _, e in rec.events if k == "memory")
        self.assertEqual(first, (0, 100, 5000, 1001), "bytes in use, held, and peak in use")
        # A slow read is gpuscope's cost once, also when made inside a hook
        # that times itself.
        slept = []

        def slow(device):
            t = time.perf_counter_ns()
            time.sleep(0.01)
            slept.append(time.perf_counter_ns() - t)
            return fast(device)

        fast, stats = stats, slow
        rec = run(True)
        stats = fast
        self.assertGreater(len(slept), 8, "every bound read")
        # (The reads after the last forward are not sent yet.)
        cost = sum(ns for k, _, ns in rec.events if k == "cost") + run.unsent
        self.assertGreaterEqual(cost, sum(slept))
        self.assertLess(cost, sum(slept) + min(slept), "no read counted twice")
        # Off by the switch, and never before CUDA is in use.
        self.assertFalse([e for e in run(False).events if e[0] == "memory"])
        rec = Recorder()
        hooks = tr.TorchRanges(rec)
        hooks.install()
        try:
            model = Model()
            model(torch.randint(0, 32, (2, 8))).sum().backward()
        finally:
            hooks.uninstall()
        if not torch.cuda.is_initialized():
            # (Where an earlier test of the process used the GPU, CUDA is.)
            self.assertFalse([e for e in rec.events if e[0] == "memory"], "CPU torch: CUDA not initialised")

    def test_the_hooks_time_is_sent_as_gpuscopes_cost_of_forward_and_backward(self):
        rec, _ = self.train(Model())
        step = rec.steps()[-1]
        costs = [(p, ns) for k, p, ns in step if k == "cost"]
        self.assertEqual([p for p, _ in costs][:1], ["step/forward"], "the forward's, inside it")
        self.assertTrue(any(p.startswith("step/backward") for p, _ in costs), costs)
        self.assertTrue(all(ns > 0 for _, ns in costs), costs)

    def test_backward_ranges_nest_in_order(self):
        rec, _ = self.train(Model())
        depth = {}
        for kind, path, _ in rec.steps()[-1]:
            if kind == "enter":
                depth.setdefault(path, 0)
                depth[path] += 1
        # No module range is open twice at once, and none leaks a level.
        open_paths = []
        for kind, path, _ in rec.steps()[-1]:
            if kind == "enter":
                self.assertNotIn(path, open_paths)
                open_paths.append(path)
            elif kind == "exit":
                self.assertEqual(open_paths[-1], path)
                open_paths.pop()

    def test_depth_rule_and_explicit_depth(self):
        self.assertEqual(tr.repeated_block_level(Model()), 1)
        self.assertEqual(tr.default_depth(Model()), 2)
        self.assertEqual(tr.default_depth(Wrapper()), 3, "blocks one level further in")
        self.assertEqual(tr.default_depth(nn.Sequential(nn.Linear(2, 2))), tr.DEFAULT_DEPTH)
        rec, _ = self.train(Wrapper())
        last = set(rec.entered()[-40:])
        self.assertIn("step/forward/model/blocks.0/attn", last)
        self.assertNotIn("step/forward/model/blocks.0/mlp/0", "/".join(last))
        rec, _ = self.train(Wrapper(), depth=1)
        paths = set(rec.entered())
        self.assertIn("step/forward/model", paths)
        self.assertFalse(any("blocks" in p for p in paths), paths)

    def test_flops_are_counted_once_forward_and_backward(self):
        d, batch, seq = 16, 2, 8
        tokens = batch * seq
        # Per block: attn d*d, mlp d*2d + 2d*d; head d*32 (embedding: none).
        linear = 2 * tokens * (2 * (d * d + 4 * d * d) + d * 32)
        for ckpt in (None, "reentrant", "non-reentrant"):
            with self.subTest(ckpt=ckpt):
                rec, hooks = self.train(Model(d=d, ckpt=ckpt), batch=batch, seq=seq)
                step = rec.steps()[-1]
                total = sum(v for k, _, v in step if k == "flops")
                # Forward, and twice that in backward (the first Linear's
                # input needs grad too: it follows the embedding).
                self.assertAlmostEqual(total, 3 * linear, delta=1e-6 * linear)
                fwd = sum(v for k, p, v in step if k == "flops" and p.startswith("step/forward"))
                self.assertAlmostEqual(fwd, linear, delta=1e-6 * linear)
                self.assertEqual(hooks.counted.get("linear"), 7 * 4, "7 per step, re-runs not counted")
                entered = [p for k, p, _ in step if k == "enter"]
                self.assertEqual(entered.count("step/forward/blocks.0"), 1, "a re-run forward is no forward range")
                self.assertFalse(any("backward" in p and "forward" in p for p in entered), entered)
                self.assertEqual(entered.count("step/backward/blocks.0"), 1)
                exits = sum(1 for e in rec.events if e[0] == "exit")
                self.assertEqual(exits, sum(1 for e in rec.events if e[0] == "enter"), "balanced")

    def test_a_forward_without_grad_inside_training_counts_no_backward_flops(self):
        class Distill(nn.Module):
            def __init__(self):
                super().__init__()
                self.student = nn.Linear(16, 16)
                self.teacher = nn.Linear(16, 16)

            def forward(self, x):
                with torch.no_grad():
                    t = self.teacher(x)
                return (self.student(x) - t).square().mean()

        rec = Recorder()
        hooks = tr.TorchRanges(rec).install(discover=False)
        try:
            model = hooks.annotate(Distill())
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            x = torch.randn(4, 16)
            for _ in range(2):
                model(x).backward()
                opt.step()
            hooks.close_step()
        finally:
            hooks.uninstall()
        one = 2 * 4 * 16 * 16
        step = rec.steps()[-1]
        total = sum(v for k, _, v in step if k == "flops")
        # Both forwards; the student's weight gradient only (its input
        # needs none); nothing for the teacher.
        self.assertEqual(total, 2 * one + one)

    def test_sdpa_flops_from_shapes(self):
        rec = Recorder()
        hooks = tr.TorchRanges(rec).install(discover=False)
        try:
            q = torch.randn(2, 4, 8, 16)
            rec.enter(b"x", 0)
            nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
            nn.functional.scaled_dot_product_attention(q, q, q)
        finally:
            hooks.uninstall()
        flops = [v for k, _, v in rec.events if k == "flops"]
        full = 2 * 2 * 4 * 8 * 8 * (16 + 16)
        self.assertEqual(flops, [full / 2, full])

    def test_conv_and_multihead_attention_flops(self):
        rec = Recorder()
        hooks = tr.TorchRanges(rec).install(discover=False)
        try:
            conv = nn.Conv2d(3, 8, 3, padding=1, groups=1)
            with torch.no_grad():
                conv(torch.randn(2, 3, 10, 10))
            mha = nn.MultiheadAttention(16, 2, batch_first=True)
            x = torch.randn(2, 5, 16)
            mha(x, x, x, need_weights=False)
        finally:
            hooks.uninstall()
        flops = [v for k, _, v in rec.events if k == "flops"]
        self.assertEqual(flops[0], 2 * (2 * 8 * 10 * 10) * 3 * 9)
        # Packed in-projection (3 x 16 -> 16) and out-projection, then
        # attention over 2 heads of 8.
        proj = 2 * 10 * 16 * 48 + 2 * 10 * 16 * 16
        attn = 2 * (2 * 2) * 5 * 5 * (8 + 8)
        self.assertEqual(sum(flops[1:]), proj + attn)
        self.assertEqual(hooks.counted, {"conv": 1, "linear": 2, "scaled_dot_product_attention": 1})

    def test_compiled_code_opens_module_ranges_between_its_operations(self):
        from torch._dynamo.utils import counters

        torch.manual_seed(0)
        torch._dynamo.reset()
        counters.clear()
        rec = Recorder()
        hooks = tr.TorchRanges(rec).install()
        try:
            model = torch.compile(Model().eval(), backend="aot_eager")
            with torch.no_grad():
                for _ in range(4):
                    model(torch.randint(0, 32, (2, 8)))
            # Found at its first call, the model gets its hooks after that
            # call's compilation: one recompilation. Its own hooks, which
            # run outside its compiled forward, are not compiled alone.
            self.assertEqual(counters["stats"]["unique_graphs"], 2)
            rec.events.clear()
            with torch.no_grad():
                model(torch.randint(0, 32, (2, 8)))
        finally:
            hooks.uninstall()
            torch._dynamo.reset()
        entered = rec.entered()
        self.assertEqual(entered[:4], ["forward", "forward/blocks.0", "forward/blocks.0/attn", "forward/blocks.0/mlp"])
        self.assertIn("forward/head", entered)
        self.assertFalse(any("_orig_mod" in p for p in entered), entered)
        self.assertEqual(len(entered), sum(1 for e in rec.events if e[0] == "exit"), "balanced")
        # Uninstalled: the compiled code's operators record nothing more.
        before = len(rec.events)
        with torch.no_grad():
            model(torch.randint(0, 32, (2, 8)))
        self.assertEqual(len(rec.events), before)

    def test_an_annotated_model_compiles_to_as_many_graphs_as_without_hooks(self):
        from torch._dynamo.utils import counters

        graphs = []
        for hooked in (False, True):
            torch._dynamo.reset()
            counters.clear()
            model = Model().eval()
            hooks = tr.TorchRanges(Recorder()).install(discover=False) if hooked else None
            try:
                if hooks:
                    hooks.annotate(model)
                compiled = torch.compile(model, backend="aot_eager")
                with torch.no_grad():
                    for _ in range(3):
                        compiled(torch.randint(0, 32, (2, 8)))
            finally:
                if hooks:
                    hooks.uninstall()
                torch._dynamo.reset()
            graphs.append(counters["stats"]["unique_graphs"])
        self.assertEqual(graphs, [1, 1])

    def test_exported_programs_get_no_range_operators(self):
        rec = Recorder()
        hooks = tr.TorchRanges(rec).install(discover=False)
        try:
            model = hooks.annotate(Model().eval())
            ids = torch.randint(0, 32, (2, 8))
            for strict in (True, False):
                ep = torch.export.export(model, (ids,), strict=strict)
                ops = [str(n.target) for n in ep.graph.nodes if "gpuscope" in str(n.target)]
                self.assertEqual(ops, [], f"strict={strict}")
        finally:
            hooks.uninstall()

    def test_torchscript_and_fx_still_work_with_the_counting_wrappers(self):
        hooks = tr.TorchRanges(Recorder()).install(discover=False)
        try:
            torch.jit.script(nn.Linear(4, 4))
            torch.jit.script(nn.Conv2d(3, 4, 3))

            class F(nn.Module):
                def forward(self, x, w):
                    return nn.functional.linear(x, w)

            torch.fx.symbolic_trace(F())
            q = torch.randn(1, 2, 4, 8)
            nn.functional.scaled_dot_product_attention(query=q, key=q, value=q)
        finally:
            hooks.uninstall()

    def test_evaluation_opens_no_step_and_hooks_come_off(self):
        model = Model()
        rec, hooks = self.train(model, steps=3)
        n = len(rec.steps())
        rec2 = Recorder()
        hooks2 = tr.TorchRanges(rec2).install()
        try:
            with torch.no_grad():
                for _ in range(4):
                    model(torch.randint(0, 32, (2, 8)))
        finally:
            hooks2.uninstall()
        self.assertEqual(rec2.steps(), [], "no step without an optimizer step or a training forward")
        self.assertIn("forward", rec2.entered())
        self.assertEqual(n, 3)
        # Uninstalled: nothing more is recorded.
        before = len(rec2.events)
        model(torch.randint(0, 32, (2, 8))).sum().backward()
        self.assertEqual(len(rec2.events), before)

    def test_annotate_and_profile_share_one_set_of_hooks(self):
        from gpuscope import _api

        rec = Recorder()
        library, active = tr.Library, tr.ACTIVE
        tr.Library, tr.ACTIVE = (lambda path: rec), None
        try:
            a, made = _api._torch_hooks(None, discover=False)
            b, again = _api._torch_hooks(None)
            self.assertTrue(made)
            self.assertIs(a, b, "one set of optimizer, DataLoader and backward hooks")
            self.assertFalse(again, "a profile block does not take off hooks annotate installed")
            self.assertIsNotNone(a._discovery, "the later use turned discovery on")
            a.uninstall()
            c, made = _api._torch_hooks(None)
            self.assertTrue(made and c is not a, "uninstalled hooks are replaced")
            c.uninstall()
        finally:
            tr.Library, tr.ACTIVE = library, active

    def test_depth_values(self):
        self.assertEqual(tr.parse_depth("on"), "auto")
        self.assertIsNone(tr.parse_depth(""))
        self.assertEqual(tr.parse_depth(None), "auto")
        self.assertEqual(tr.parse_depth("depth=4"), 4)
        self.assertEqual(tr.parse_depth("2"), 2)
        self.assertIsNone(tr.parse_depth("off"))
        with self.assertRaisesRegex(ValueError, "GPUSCOPE_TORCH_RANGES='deep'"):
            tr.parse_depth("deep")


if __name__ == "__main__":
    unittest.main()

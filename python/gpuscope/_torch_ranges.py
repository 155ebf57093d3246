"""Automatic ranges for PyTorch programs: steps, data waits, module forward
and backward, the optimizer, and model FLOPs counted from shapes.

Self-contained (ctypes and torch only): `gpuscope run --torch-ranges` loads
this file into programs that never import gpuscope.

Ranges (paths as the report shows them):
- `step`: opened by the first data fetch or training forward after the
  previous optimizer step, closed at the next one: one per optimizer step,
  whichever optimizer, with the loop's other work (zero_grad, logging).
- `step/data`: time in the DataLoader iterator's `__next__`.
- `step/forward/<child>/...`: the model's forward; each module by its
  qualified name relative to the range around it (`model/layers.3/self_attn`),
  to the chosen depth. Leaf modules that hold no parameters (activations,
  dropout) or are cheap and many (norms, embedding lookups) get no range of
  their own: their time counts for the module around them.
- `step/backward/...`: `loss.backward()`, and inside it each module's
  backward, from autograd graph hooks on autograd's worker thread.
- `step/optimizer`: `optimizer.step()`.
- Activation checkpointing: a forward re-run inside backward opens no
  forward range and counts no FLOPs; its time counts for the backward
  range it runs in.

Default depth: one level inside the model's repeated blocks (the children
of a ModuleList or Sequential of two or more modules of one type: decoder
layers, ResNet blocks), so each block's attention and MLP get ranges; 3
levels when there are none. Levels count called modules: a ModuleList is
not a level.
"""

import atexit
import ctypes
import os
import sys
import threading
import time
from functools import partial

FOLLOW = 1
DISCARD = 2
#: Levels of module ranges when no repeated blocks are found.
DEFAULT_DEPTH = 3
#: Root calls after which modules are no longer looked for.
DISCOVERY_CALLS = 3


class Library:
    """gpuscope's C ABI range calls (the backend the hooks drive):
    enter(name: bytes, flags), exit(flags), flops(float), cost(ns: int)
    (the hooks' own time, counted as gpuscope's cost), called straight
    through ctypes (no Python layer between the hook and the library)."""

    def __init__(self, path):
        h = ctypes.CDLL(path)
        h.gpuscope_range_enter.argtypes = [ctypes.c_char_p, ctypes.c_uint32]
        h.gpuscope_range_exit.argtypes = [ctypes.c_uint32]
        h.gpuscope_range_flops.argtypes = [ctypes.c_double]
        h.gpuscope_range_cost.argtypes = [ctypes.c_uint64]
        self.enter = h.gpuscope_range_enter
        self.exit = h.gpuscope_range_exit
        # program_range(): the thread's innermost open range of the
        # program's own (an id; 0: none).
        program = getattr(h, "gpuscope_program_range", None)
        if program is not None:
            program.restype = ctypes.c_uint64
            program.argtypes = []
            self.program_range = program
        else:
            self.program_range = lambda: 0
        self.flops = h.gpuscope_range_flops
        self.cost = h.gpuscope_range_cost
        # memory(at, allocated, reserved, peak): the caching allocator's
        # figures at a range's start (0) or end (1).
        memory = getattr(h, "gpuscope_range_framework_memory", None)
        if memory is not None:
            memory.argtypes = [ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
            self.memory = memory
        else:
            self.memory = None


def _is_compiling():
    return False


def _graph_task_id():
    return -1


#: torch.export.export is running: exported programs get no range
#: operators (loading them would need gpuscope). Set by the wrapper
#: `install` puts on torch.export.export (torch.compiler.is_exporting() reads
#: True to any code dynamo traces, so it cannot tell).
_EXPORTING = False


_get_ident = threading.get_ident
_clock = time.perf_counter_ns

#: torch, once `install` ran (the hooks run on every module call: no
#: import statement there).
_torch = None


def _first_tensor(args, kwargs=None, grad=False):
    """The first tensor among `args` and `kwargs` values, one level into
    tuples, lists and dicts (model outputs are dicts), or None; with
    `grad`, the first that an autograd node made."""
    for a in args:
        if isinstance(a, _torch.Tensor):
            if not grad or a.grad_fn is not None:
                return a
        elif isinstance(a, (tuple, list)):
            for x in a:
                if isinstance(x, _torch.Tensor) and (not grad or x.grad_fn is not None):
                    return x
        elif isinstance(a, dict):
            for x in a.values():
                if isinstance(x, _torch.Tensor) and (not grad or x.grad_fn is not None):
                    return x
    if kwargs:
        for x in kwargs.values():
            if isinstance(x, _torch.Tensor) and (not grad or x.grad_fn is not None):
                return x
    return None


#: The backend the compiled-region range operators call (the latest
#: installed hooks'); None until they are registered.
_COMPILED_OPS = None


def _register_compiled_ops(backend):
    """Range operators torch.compile keeps in its graphs: `gpuscope::
    range_enter(x, name)` and `range_exit(y)`, ordered among themselves (an
    effect) and after the tensor they take (a module's input, its output),
    so compiled code opens and closes module ranges between the kernels it
    launches, also while a CUDA graph is captured. False where this torch
    has no custom operators."""
    global _COMPILED_OPS
    if _COMPILED_OPS is not None:
        _COMPILED_OPS[0] = backend
        return True
    try:
        from torch._library.effects import EffectType
        from typing import Optional

        cell = [backend]

        @_torch.library.custom_op("gpuscope::range_enter", mutates_args=())
        def range_enter(x: Optional[_torch.Tensor], name: str) -> None:
            cell[0].enter(name.encode(), 0)

        @_torch.library.custom_op("gpuscope::range_exit", mutates_args=())
        def range_exit(y: Optional[_torch.Tensor]) -> None:
            cell[0].exit(0)

        range_enter.register_fake(lambda x, name: None)
        range_exit.register_fake(lambda y: None)
        range_enter.register_effect(EffectType.ORDERED)
        range_exit.register_effect(EffectType.ORDERED)
    except (ImportError, AttributeError, RuntimeError, TypeError, ValueError) as e:
        print(f"gpuscope: no module ranges inside torch.compile'd code on torch {_torch.__version__} ({e})",
              file=sys.stderr)
        return False
    _COMPILED_OPS = cell
    return True


def _gradients(x, w):
    """How many gradients backward computes for a product of `x` and
    weight `w`: the input's, the weight's; none without grad."""
    if not _torch.is_grad_enabled():
        return 0
    return x.requires_grad + w.requires_grad


class _Info:
    """One annotated module: its range name and place in the tree."""

    __slots__ = ("name", "text", "qual", "root", "ancestors", "armed", "calls", "primary")

    def __init__(self, name, qual, root, ancestors):
        self.text = name
        self.name = name.encode()
        self.qual = qual
        self.root = root if root is not None else self
        self.ancestors = ancestors
        self.armed = True
        self.calls = 0
        self.primary = False


class _Call:
    """One forward call of a ranged module, until its backward ends."""

    __slots__ = ("info", "fwd_flops", "bwd_flops", "begun", "pushed", "grad", "task")

    def __init__(self, info, grad):
        self.info = info
        self.grad = grad
        self.fwd_flops = 0.0
        self.bwd_flops = 0.0
        self.begun = False
        self.pushed = False
        self.task = -1


def repeated_block_level(model):
    """The level (called modules from the root, root = 0) of the first
    repeated blocks, or None."""
    import torch.nn as nn

    def walk(m, level):
        for child in m.children():
            if isinstance(child, (nn.ModuleList, nn.Sequential)):
                kids = list(child.children())
                if len(kids) >= 2 and len({type(k) for k in kids}) == 1 and any(True for _ in kids[0].children()):
                    # A Sequential is called (a level); a ModuleList is not.
                    return level + (2 if isinstance(child, nn.Sequential) else 1)
            found = walk(child, level if isinstance(child, (nn.ModuleList, nn.ModuleDict)) else level + 1)
            if found is not None:
                return found
        return None

    return walk(model, 0)


def default_depth(model):
    """Module range levels: one inside the repeated blocks, else 3."""
    level = repeated_block_level(model)
    return DEFAULT_DEPTH if level is None else min(max(level + 1, 1), 6)


class _Silent:
    """A backend that records nothing."""

    def enter(self, name, flags):
        pass

    def exit(self, flags):
        pass

    def flops(self, flops):
        pass

    def cost(self, ns):
        pass

    memory = None


def _calibrate_dispatch(calls=200, rounds=5):
    """What torch takes to call an empty module hook, beyond the hook
    itself: the fastest of a few rounds of calls of a CPU module with and
    without a pre- and a post-hook, ns per hook call (0 if it cannot be
    measured). No backward and no GPU work: installing must not start
    autograd's threads (fork) or initialise CUDA. Autograd node hooks are
    taken to cost the same to call. About 1 ms, once per install."""
    try:
        m = _torch.nn.Identity()
        x = _torch.zeros(1, device="cpu")

        def best():
            t = []
            for _ in range(rounds):
                t0 = _clock()
                for _ in range(calls):
                    m(x)
                t.append(_clock() - t0)
            return min(t) / calls

        def nothing(*a, **k):
            return None

        plain = best()
        handles = [m.register_forward_pre_hook(nothing, with_kwargs=True),
                   m.register_forward_hook(nothing, with_kwargs=True)]
        try:
            hooked = best()
        finally:
            for h in handles:
                h.remove()
        return int(max(0.0, (hooked - plain) / 2))
    except Exception:  # noqa: BLE001 - a calibration may not stop the program
        return 0


def _script_as(fn, op):
    """Lets TorchScript compile calls of `fn` as operator `op`."""
    try:
        from torch.jit._builtins import _register_builtin

        _register_builtin(fn, op)
    except (ImportError, AttributeError, RuntimeError):
        pass


def _not_compiled_alone(*functions):
    """Keeps torch.compile from compiling these hooks as frames of their
    own (a compiled module's own hooks run outside its compiled forward:
    compiled alone, each would be one more graph, and one more CUDA graph
    under mode="reduce-overhead"). Called from compiled code, they are
    still traced into it."""
    try:
        from torch._C._dynamo.eval_frame import set_code_exec_strategy
        from torch._dynamo.types import FrameAction, FrameExecStrategy
    except (ImportError, AttributeError):
        return
    for f in functions:
        set_code_exec_strategy(f.__code__, FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP))


def _compiled_inner(module):
    """The module a torch.compile wrapper (OptimizedModule) compiles, or
    None for any other module."""
    inner = getattr(module, "_orig_mod", None)
    if inner is not None and type(module).__name__ == "OptimizedModule":
        return inner
    return None


class TorchRanges:
    """Installs the hooks; `backend` is like `Library`: enter(name: bytes,
    flags), exit(flags), flops(float), cost(ns)."""

    def __init__(self, backend, depth=None, count_flops=True):
        self.lib = backend
        self.depth = depth
        self.count_flops = count_flops
        self._main = threading.main_thread().ident
        self._step = 0  # 0: none open; 1: open; 2: open, its optimizer step done
        # Whether the open step is the hooks' own range (not the program's
        # range standing for it); the program's innermost range when the
        # last step began and at its optimizer step.
        self._opened = False
        self._program_begin = 0
        self._program_post = 0
        self._optimizer_depth = 0
        self._backward_depth = 0
        self._forward = {}  # thread id -> [ _Call ] open forward calls
        self._backward = {}  # thread id -> [ _Call ] open backward ranges
        self._pending = []  # (node, call): backward beginnings to register
        self._annotated = {}  # id(module) -> _Info
        self._known = set()  # id() of every module of an annotated model
        self._handles = []
        self._undo = []
        self._discovery = None
        self._primary = None
        self.counted = {}  # kind -> calls counted
        self._cost = {}  # thread id -> hook time not yet sent, ns
        self._recompute = {}  # thread id -> re-run forward's backward FLOPs
        self._backend = backend
        # What torch takes to call one hook (module or autograd node),
        # beyond the hook's own time (calibrated at install), ns.
        self._hook_call_ns = 0
        self.installed = False
        #: The caching allocator's figures go with step, forward, backward
        #: and optimizer ranges (when CUDA is in use).
        self.sample_memory = os.environ.get("GPUSCOPE_DEVICE_MEMORY", "on").strip() not in ("off", "0")
        self._memory_stats = None

    # ---- the caching allocator --------------------------------------------

    def _memory(self, at, timed=True):
        """Sends the caching allocator's figures (bytes in use, held, peak
        in use) for the innermost open range's start (0) or end (1). Never
        initialises CUDA. `timed`: its time counts as gpuscope's cost here
        (False inside a hook that times itself whole)."""
        stats, send = self._memory_stats, getattr(self.lib, "memory", None)
        if stats is None or send is None or not self.sample_memory or not _torch.cuda.is_initialized():
            return
        t0 = _clock()
        try:
            s = stats(_torch.cuda.current_device())
            used = s["allocated_bytes"]["all"]
            send(at, used["current"], s["reserved_bytes"]["all"]["current"], used["peak"])
        except Exception:
            self._memory_stats = None
        if timed:
            self._spent(t0)

    # ---- the step -------------------------------------------------------

    def _activity(self, timed=True):
        """A data fetch or training forward on the loop's thread; True when
        it began a step. `timed`: as for `_memory`."""
        if _get_ident() != self._main:
            return False
        if self._step == 2:
            self.close_step(timed)
        return self._open_step(timed)

    def _open_step(self, timed=True):
        """Begins a step if none is; True when it did. Where the program
        opens a range of its own every step around the whole step (the
        range open when the previous step began was still open at its
        optimizer step, and another is open now), that range is the step:
        no `step` range is opened over it (`_opened` says which)."""
        if self._step:
            return False
        self._step = 1
        program = self._backend_program_range()
        led = bool(program) and self._program_begin != 0 and self._program_post == self._program_begin \
            and program != self._program_begin
        self._program_begin, self._program_post = program, 0
        self._opened = not led
        if self._opened:
            self.lib.enter(b"step", 0)
            self._memory(0, timed)
        return True

    def _backend_program_range(self):
        get = getattr(self.lib, "program_range", None)
        return get() if get is not None else 0

    def close_step(self, timed=True):
        """Closes a step whose optimizer step is done (or any, at exit)."""
        if _get_ident() == self._main and self._step:
            if self._opened:
                self._memory(1, timed)
                self.lib.exit(0)
            self._step = 0
            self._opened = False

    def _optimizer_pre(self, optimizer, args, kwargs):
        if _get_ident() != self._main:
            return
        self._optimizer_depth += 1
        if self._optimizer_depth == 1:
            self._open_step()
            self.lib.enter(b"optimizer", 0)
            self._memory(0)

    def _optimizer_post(self, optimizer, args, kwargs):
        if _get_ident() != self._main or self._optimizer_depth == 0:
            return
        self._optimizer_depth -= 1
        if self._optimizer_depth == 0:
            self._memory(1)
            self.lib.exit(0)
            self._step = 2
            self._program_post = self._backend_program_range()

    # ---- forward --------------------------------------------------------

    def _pre(self, info, module, args, kwargs):
        # Runs on every call of every ranged module: kept lean.
        if _is_compiling():
            if info.root.armed and _COMPILED_OPS and not _EXPORTING:
                _torch.ops.gpuscope.range_enter(_first_tensor(args, kwargs), info.text)
            return
        if not info.root.armed or _graph_task_id() != -1:
            # (A forward re-run inside backward is checkpointing: its time
            # counts for the backward range it runs in, its FLOPs not at all.)
            return
        t0 = _clock()
        grad = _torch.is_grad_enabled()
        if info.root is info:
            self._root_call(info, grad)
        if self._pending:
            self._flush_pending()
        tid = _get_ident()
        stack = self._forward.get(tid)
        if stack is None:
            stack = self._forward[tid] = []
        call = _Call(info, grad)
        self.lib.enter(info.name, 0)
        if info.root is info:
            self._memory(0, timed=False)
        stack.append(call)
        if grad:
            t = _first_tensor(args, kwargs, grad=True)
            if t is not None:
                t.grad_fn.register_prehook(partial(self._end_hook, call))
        self._spent(t0, self._hook_call_ns)

    def _root_call(self, info, grad):
        info.calls += 1
        if info.calls >= DISCOVERY_CALLS:
            self._stop_discovery()
        # Inside `_pre`, which times itself.
        if grad:
            self._activity(timed=False)
        elif self._step == 2:
            self.close_step(timed=False)

    def _post(self, info, module, args, kwargs, output):
        if _is_compiling():
            if info.root.armed and _COMPILED_OPS and not _EXPORTING:
                _torch.ops.gpuscope.range_exit(_first_tensor((output,)))
            return
        if not info.root.armed:
            if info.root is info:
                info.armed = True
            return
        if _graph_task_id() != -1:
            # A re-run forward (non-reentrant checkpointing may stop it
            # before this hook: nothing may wait for it).
            return
        t0 = _clock()
        stack = self._forward.get(_get_ident())
        if not stack:
            return
        call = stack[-1]
        if call.info is not info:
            # An exception unwound calls in between: drop them.
            while stack and stack[-1].info is not info:
                stack.pop()
                self.lib.exit(0)
            if not stack:
                return
            call = stack[-1]
        stack.pop()
        if call.fwd_flops:
            # The FLOPs of its own calls, in one call (its children's went
            # at their ends).
            self.lib.flops(call.fwd_flops)
        dispatch_ns = self._hook_call_ns
        if info.root is info:
            self._memory(1, timed=False)
            # The forward's hooks' time, as gpuscope's cost of it (torch's
            # cost of calling this hook counted once, here).
            self._spent(t0, dispatch_ns)
            dispatch_ns = 0
            t0 = _clock()
            self._send_cost()
        self.lib.exit(0)
        if call.grad:
            t = _first_tensor((output,), grad=True)
            if t is not None:
                self._pending.append((t.grad_fn, call))
        if info.root is info:
            self._flush_pending()
        self._spent(t0, dispatch_ns)

    def _spent(self, t0, dispatch_ns=0):
        """Adds the time since `t0`, and `dispatch_ns` (torch's cost of
        calling the hook, calibrated), to the calling thread's hook time."""
        tid = _get_ident()
        self._cost[tid] = self._cost.get(tid, 0) + (_clock() - t0) + dispatch_ns

    def _send_cost(self):
        """Counts the calling thread's hook time so far as gpuscope's cost
        (of its innermost open range and those around it)."""
        ns = self._cost.pop(_get_ident(), 0)
        if ns > 0:
            self.lib.cost(ns)

    def _flush_pending(self):
        """Registers backward beginnings, outer modules first where several
        begin at one node (a module returning its last child's output)."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        pending.sort(key=lambda p: (id(p[0]), len(p[1].info.ancestors)))
        for node, call in pending:
            node.register_prehook(partial(self._begin_hook, call))

    # ---- FLOPs ----------------------------------------------------------

    def _flops(self, kind, fwd, bwd):
        """Counts a call's forward FLOPs for the innermost open ranged call
        (sent when it ends) and its backward FLOPs for the backward range of
        the innermost one made with grad on."""
        self.counted[kind] = self.counted.get(kind, 0) + 1
        stack = self._forward.get(_get_ident())
        if not stack:
            self.lib.flops(fwd)
            return
        call = stack[-1]
        call.fwd_flops += fwd
        if bwd:
            if call.grad:
                call.bwd_flops += bwd
            else:
                self._backward_flops(stack, bwd)

    def _linear(self, x, w):
        if _is_compiling() or not isinstance(x, _torch.Tensor):
            return
        t0 = _clock()
        try:
            fwd = 2.0 * x.numel() * w.shape[0]
            if _graph_task_id() != -1:
                self._recomputed(fwd * _gradients(x, w))
            else:
                self._flops("linear", fwd, fwd * _gradients(x, w))
        except (AttributeError, IndexError):
            pass
        self._spent(t0)

    def _conv(self, x, w, out):
        if _is_compiling() or not isinstance(out, _torch.Tensor):
            return
        t0 = _clock()
        try:
            # Weight (out channels, in channels / groups, kernel...).
            fwd = 2.0 * out.numel() * (w.numel() // w.shape[0])
            if _graph_task_id() != -1:
                self._recomputed(fwd * _gradients(x, w))
            else:
                self._flops("conv", fwd, fwd * _gradients(x, w))
        except (AttributeError, IndexError, ZeroDivisionError):
            pass
        self._spent(t0)

    def _sdpa(self, q, k, v, *args, **kwargs):
        if _is_compiling() or not isinstance(q, _torch.Tensor):
            return
        t0 = _clock()
        try:
            lead = 1
            for s in q.shape[:-2]:
                lead *= s
            l, e = q.shape[-2], q.shape[-1]
            s_len, ev = k.shape[-2], v.shape[-1]
        except (AttributeError, IndexError):
            self._spent(t0)
            return
        causal = kwargs.get("is_causal", args[2] if len(args) > 2 else False)
        fwd = 2.0 * lead * l * s_len * (e + ev) * (0.5 if causal and l == s_len else 1.0)
        # Backward: 2.5x forward (dQ, dK, dV and the recomputed scores).
        bwd = 2.5 * fwd if q.requires_grad and _torch.is_grad_enabled() else 0.0
        if _graph_task_id() != -1:
            self._recomputed(bwd)
        else:
            self._flops("scaled_dot_product_attention", fwd, bwd)
        self._spent(t0)

    def _recomputed(self, bwd):
        """A forward run again inside backward (activation checkpointing):
        its FLOPs are not counted again. Reentrant checkpointing ran the
        first forward without grad, so the backward FLOPs of the re-run are
        held here until it calls backward on it (see `_backward_call`);
        non-reentrant checkpointing's were counted with the first forward,
        and are dropped when the backward ends."""
        if bwd:
            tid = _get_ident()
            self._recompute[tid] = self._recompute.get(tid, 0.0) + bwd

    @staticmethod
    def _backward_flops(stack, flops):
        """Backward FLOPs count when the backward range of the innermost
        ranged call that has one (made with grad on) closes."""
        for c in reversed(stack):
            if c.grad or c is stack[0]:
                c.bwd_flops += flops
                return

    # ---- backward -------------------------------------------------------

    def _begin_hook(self, call, grad_outputs):
        t0 = _clock()
        self._begin(call)
        self._spent(t0, self._hook_call_ns)

    def _end_hook(self, call, grad_outputs):
        t0 = _clock()
        self._end(call)
        self._spent(t0, self._hook_call_ns)

    def _begin(self, call):
        if call.begun:
            return
        tid = _get_ident()
        stack = self._backward.get(tid)
        if stack is None:
            stack = self._backward[tid] = []
        task = _graph_task_id()
        # Ranges left open on this thread by an earlier backward (whose end
        # ran on another thread) are done.
        while stack and stack[-1].task != task:
            self._close(stack.pop())
        if not stack:
            _torch.autograd.Variable._execution_engine.queue_callback(self._backward_done)
        # Ranges still open that are not around this module are done.
        while stack and stack[-1].info not in call.info.ancestors:
            self._close(stack.pop())
        call.begun = True
        call.task = task
        info = call.info
        # The model's own backward is the `backward` range around it.
        call.pushed = not (info.root is info and info.primary)
        if call.pushed:
            self.lib.enter(info.name, FOLLOW)
        stack.append(call)

    def _end(self, call):
        stack = self._backward.get(_get_ident())
        if not stack or call not in stack:
            return
        while stack:
            c = stack.pop()
            self._close(c)
            if c is call:
                break

    def _close(self, call):
        if call.bwd_flops:
            self.lib.flops(call.bwd_flops)
            call.bwd_flops = 0.0
        if call.pushed:
            self.lib.exit(0)
            call.pushed = False

    def _backward_done(self):
        tid = _get_ident()
        stack = self._backward.get(tid)
        while stack:
            self._close(stack.pop())
        self._recompute.pop(tid, None)
        # The backward hooks' time, as gpuscope's cost of the backward
        # (this thread has no range left: the `backward` range's).
        self._send_cost()

    def _backward_call(self, original):
        def backward(*args, **kwargs):
            tid = _get_ident()
            outer = tid == self._main and _graph_task_id() == -1 and self._backward_depth == 0
            if not outer:
                # Reentrant checkpointing's backward through its re-run
                # forward: that re-run's backward FLOPs happen now.
                pending = self._recompute.pop(tid, 0.0)
                if pending:
                    self.lib.flops(pending)
                return original(*args, **kwargs)
            if self._step == 2:
                # A new step whose forward the hooks did not see (compiled).
                self.close_step()
            self._open_step()
            self._backward_depth += 1
            self.lib.enter(b"backward", 0)
            self._memory(0)
            try:
                return original(*args, **kwargs)
            finally:
                # Module ranges this thread opened (a backward that ran on
                # the calling thread, in part or whole) close inside it.
                stack = self._backward.get(tid)
                while stack:
                    self._close(stack.pop())
                self._memory(1)
                self._send_cost()
                self.lib.exit(0)
                self._backward_depth -= 1

        backward.__wrapped__ = original
        return backward

    # ---- modules --------------------------------------------------------

    def annotate(self, model, depth=None):
        """Ranges for `model`'s forward and backward and its modules to
        `depth` levels (default: see the module). Returns `model`."""
        import torch.nn as nn

        inner = _compiled_inner(model)
        if inner is not None:
            # torch.compile's wrapper: the model it compiles is annotated
            # (its hooks run inside the compiled code).
            self._known.add(id(model))
            self.annotate(inner, depth)
            return model
        key = id(model)
        if key in self._annotated:
            return model
        depth = depth if depth is not None else (self.depth if self.depth is not None else default_depth(model))
        root_info = None

        def visit(m, qual, level, ranged_ancestor, ancestors):
            nonlocal root_info
            if id(m) in self._known:
                return
            self._known.add(id(m))
            container = isinstance(m, (nn.ModuleList, nn.ModuleDict))
            has_params = any(True for _ in m.parameters(recurse=False))
            has_children = any(True for _ in m.children())
            is_root = root_info is None
            # Leaves that are cheap and many (norms, embedding lookups) or
            # hold no parameters (activations, dropout) get no range: their
            # time counts for the module around them.
            light = isinstance(m, (nn.Embedding, nn.EmbeddingBag)) or "Norm" in type(m).__name__
            ranged = not container and level <= depth and (
                is_root or has_children or (has_params and not light))
            if is_root:
                name = "forward" if self._primary is None else type(m).__name__
            elif ranged_ancestor is None or ranged_ancestor.qual == "":
                name = qual
            else:
                name = qual[len(ranged_ancestor.qual) + 1:]
            info = None
            if ranged:
                info = _Info(name, qual, root_info, ancestors)
                if is_root:
                    root_info = info
                    info.primary = self._primary is None
                    if info.primary:
                        self._primary = info
                self._annotated[id(m)] = info
                self._handles.append(m.register_forward_pre_hook(partial(self._pre, info), with_kwargs=True))
                # always_call: an exception out of the module still closes its
                # range.
                self._handles.append(m.register_forward_hook(partial(self._post, info), with_kwargs=True,
                                                             always_call=True))
            child_ranged = info if info is not None else ranged_ancestor
            child_ancestors = ancestors | {info} if info is not None else ancestors
            for child_name, child in m.named_children():
                child_qual = f"{qual}.{child_name}" if qual else child_name
                visit(child, child_qual, level if container else level + 1, child_ranged, child_ancestors)

        visit(model, "", 0, None, frozenset())
        return model

    def _discover(self, module, args):
        if _is_compiling() or id(module) in self._known:
            return
        if self._forward.get(_get_ident()):
            return
        if next(module.parameters(), None) is None:
            return
        inner = _compiled_inner(module)
        self.annotate(module)
        info = self._annotated.get(id(module))
        if info is not None and inner is None:
            # Its hooks start with its next call (this one's pre-hook ran).
            info.armed = False

    def _stop_discovery(self):
        if self._discovery is not None:
            self._discovery.remove()
            self._discovery = None

    # ---- install --------------------------------------------------------

    def install(self, discover=True):
        """Hooks the optimizer, DataLoader and backward; with `discover`,
        annotates models (modules with parameters called at the top level)
        at their first call."""
        global _is_compiling, _graph_task_id, _torch
        import torch
        import torch.optim.optimizer as optim
        import torch.utils.data.dataloader as dl

        if self.installed:
            return self
        self.lib = self._backend
        self.installed = True
        _torch = torch
        # torch.cuda.memory_stats without its flattening (one call per
        # range bound).
        self._memory_stats = getattr(torch._C, "_cuda_memoryStats", None)
        # Before any hook or patch is in place.
        self._hook_call_ns = _calibrate_dispatch()
        _is_compiling = torch.compiler.is_compiling
        _graph_task_id = torch._C._current_graph_task_id
        self._handles.append(optim.register_optimizer_step_pre_hook(self._optimizer_pre))
        self._handles.append(optim.register_optimizer_step_post_hook(self._optimizer_post))

        it = dl._BaseDataLoaderIter
        original_next = it.__next__
        ranges = self

        def __next__(self):
            began = ranges._activity()
            ranges.lib.enter(b"data", 0)
            try:
                batch = original_next(self)
            except StopIteration:
                # The end of the data: no step began.
                ranges.lib.exit(DISCARD if began else 0)
                if began:
                    if ranges._opened:
                        ranges.lib.exit(DISCARD)
                    ranges._step = 0
                    ranges._opened = False
                raise
            except BaseException:
                ranges.lib.exit(0)
                raise
            ranges.lib.exit(0)
            return batch

        it.__next__ = __next__
        self._undo.append(lambda: setattr(it, "__next__", original_next))

        original_backward = torch.autograd.backward
        torch.autograd.backward = self._backward_call(original_backward)
        self._undo.append(lambda: setattr(torch.autograd, "backward", original_backward))

        self._patch_export()
        if self.count_flops:
            self._patch_counted()
        _register_compiled_ops(self.lib)
        _not_compiled_alone(TorchRanges._pre, TorchRanges._post, TorchRanges._discover)

        if discover:
            self.discover()
        atexit.register(self.close_step)
        return self

    def _patch_export(self):
        """Marks torch.export.export's tracing (see `_EXPORTING`)."""
        try:
            import torch.export as te
        except ImportError:
            return
        original = te.export

        def export(*args, **kwargs):
            global _EXPORTING
            before, _EXPORTING = _EXPORTING, True
            try:
                return original(*args, **kwargs)
            finally:
                _EXPORTING = before

        export.__wrapped__ = original
        te.export = export
        self._undo.append(partial(setattr, te, "export", original))

    def _patch_counted(self):
        """Counts FLOPs at the functions nn.Linear, nn.ConvNd and attention
        call (one Python call each, cheaper than a module hook; functional
        calls and nn.MultiheadAttention's projections count too)."""
        import torch.nn.functional as F

        ranges = self
        linear_, sdpa_ = F.linear, F.scaled_dot_product_attention

        def linear(input, weight, *args, **kwargs):
            ranges._linear(input, weight)
            return linear_(input, weight, *args, **kwargs)

        def scaled_dot_product_attention(query, key, value, *args, **kwargs):
            ranges._sdpa(query, key, value, *args, **kwargs)
            return sdpa_(query, key, value, *args, **kwargs)

        def conv(original):
            def convolution(input, weight, *args, **kwargs):
                out = original(input, weight, *args, **kwargs)
                ranges._conv(input, weight, out)
                return out

            return convolution

        patched = {"linear": linear, "scaled_dot_product_attention": scaled_dot_product_attention}
        for name in ("conv1d", "conv2d", "conv3d"):
            patched[name] = conv(getattr(F, name))
        for name, fn in patched.items():
            original = getattr(F, name)
            fn.__wrapped__ = original
            # TorchScript compiles calls to F.linear & co. as the aten
            # operators: it must keep doing so with the wrappers.
            _script_as(fn, f"aten::{name}")
            setattr(F, name, fn)
            self._undo.append(partial(setattr, F, name, original))

    def discover(self):
        """Annotates models (modules with parameters called at the top
        level) at their first call, until one has been called a few times."""
        from torch.nn.modules.module import register_module_forward_pre_hook

        if self._discovery is None:
            self._discovery = register_module_forward_pre_hook(self._discover)

    def uninstall(self):
        """Removes every hook and patch (the step open is closed)."""
        self.close_step()
        self._stop_discovery()
        for h in self._handles:
            h.remove()
        self._handles.clear()
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        self._annotated.clear()
        self._known.clear()
        # Autograd hooks already on a live graph, and wrappers kept by
        # reference, may still run: they report nothing now.
        backend, self.lib = self.lib, _Silent()
        self._forward.clear()
        self._backward.clear()
        self._pending = []
        self._cost.clear()
        self._recompute.clear()
        if _COMPILED_OPS is not None and _COMPILED_OPS[0] is backend:
            # Compiled code keeps calling the operators: they do nothing now.
            _COMPILED_OPS[0] = _Silent()
        self.installed = False

    def summary(self):
        """Which calls' FLOPs were counted, in words."""
        if not self.counted:
            return "no call's FLOPs were counted"
        parts = [f"{n} {k}" for k, n in sorted(self.counted.items())]
        return "model FLOPs counted from " + ", ".join(parts) + (
            " calls (F.linear: nn.Linear and nn.MultiheadAttention's projections; F.conv1d/2d/3d; "
            "F.scaled_dot_product_attention; not counted: torch.matmul and other products, compiled regions)")


#: `GPUSCOPE_FUNCTION_ROOT`: the walk up a Python stack stops at the frame.
FUNCTION_ROOT = 1
#: Levels the library keeps at most.
MAX_STACK_LEVELS = 16


def _unwrapped_code(fn):
    """The code object that runs as `fn`'s own frame: under decorators
    (functools.wraps), the innermost function's."""
    seen = 0
    while hasattr(fn, "__wrapped__") and seen < 16:
        fn, seen = fn.__wrapped__, seen + 1
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "__code__", None)


class StackModules:
    """Module ranges with no hook per module call: the library attributes
    each launch to the registered modules' `forward` frames on the
    launching thread's Python stack (`Model/DecoderLayer/Attention`, by
    class name), and to an optimizer's `step`. Models are found at their
    first calls (a forward pre-hook on every module until one model has
    been called a few times), optimizers at their first steps; after that
    no Python runs per call. Backward kernels launched by autograd's worker
    thread count for a module only where Python runs there (a checkpointed
    forward run again, a custom Function's backward)."""

    #: Not the hooks (`TorchRanges`): `annotate` and `profile(torch_ranges=)`
    #: install those beside it.
    stack = True

    def __init__(self, path, depth=None):
        h = ctypes.CDLL(path)
        h.gpuscope_python_functions.argtypes = [
            ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_uint32),
            ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint32, ctypes.c_size_t]
        h.gpuscope_last_error.restype = ctypes.c_char_p
        self._h = h
        self.depth = depth
        self.levels = 1
        # id(code) -> (code, name, root): keyed by identity (code objects
        # compare equal by content), each kept alive while registered.
        self._functions = {}
        self._known = set()  # id() of modules of registered models
        self._roots = set()  # id() of the models found
        self._root_calls = 0
        self._optimizer_steps = 0
        self._handles = []
        self._lock = threading.Lock()
        self.error = None

    def install(self):
        """Looks for models and optimizers (see the class)."""
        import torch.optim.optimizer as optim
        from torch.nn.modules.module import register_module_forward_pre_hook

        self._handles = [register_module_forward_pre_hook(self._discover),
                         optim.register_optimizer_step_pre_hook(self._optimizer)]
        atexit.register(self.uninstall)
        return self

    def uninstall(self):
        """Stops looking and unregisters every function."""
        for which in range(len(self._handles)):
            self._stop(which)
        self._functions.clear()
        self._register()
        atexit.unregister(self.uninstall)

    def _discover(self, module, args):
        key = id(module)
        if key in self._roots:
            # Models are looked for until one has been called a few times.
            self._root_calls += 1
            if self._root_calls >= DISCOVERY_CALLS:
                self._stop(0)
            return
        if key in self._known or next(module.parameters(), None) is None:
            return
        inner = _compiled_inner(module)
        self._roots.add(key)
        self._known.add(key)
        self._add_model(inner if inner is not None else module)

    def _optimizer(self, optimizer, args, kwargs):
        # Every optimizer class stepped in the first steps (a model may
        # have two: AdamW and Muon).
        code = _unwrapped_code(type(optimizer).step)
        if code is not None and id(code) not in self._functions:
            self._functions[id(code)] = (code, "optimizer", True)
            self._register()
        self._optimizer_steps += 1
        if self._optimizer_steps >= 4 * DISCOVERY_CALLS:
            self._stop(1)

    def _stop(self, which):
        if len(self._handles) > which and self._handles[which] is not None:
            self._handles[which].remove()
            self._handles[which] = None

    def _add_model(self, model):
        import torch.nn as nn

        depth = self.depth if self.depth is not None else default_depth(model)
        self.levels = min(max(self.levels, depth + 1), MAX_STACK_LEVELS)
        inner_codes = set()

        def visit(m, level, root):
            self._known.add(id(m))
            container = isinstance(m, (nn.ModuleList, nn.ModuleDict))
            has_params = any(True for _ in m.parameters(recurse=False))
            has_children = any(True for _ in m.children())
            light = isinstance(m, (nn.Embedding, nn.EmbeddingBag)) or "Norm" in type(m).__name__
            code = _unwrapped_code(type(m).forward)
            if code is not None and not root:
                inner_codes.add(id(code))
            if code is not None and not container and level <= depth and (
                    root or has_children or (has_params and not light)):
                _, name, was_root = self._functions.get(id(code), (code, type(m).__name__, False))
                self._functions[id(code)] = (code, name, was_root or root)
            for child in m.children():
                visit(child, level if container else level + 1, False)

        visit(model, 0, True)
        root = _unwrapped_code(type(model).forward)
        if root is not None and id(root) in inner_codes and id(root) in self._functions:
            # The model's class runs inside it too (a Sequential of
            # Sequentials): a stop there would cut the inner ones' paths.
            code, name, _ = self._functions[id(root)]
            self._functions[id(root)] = (code, name, False)
        self._register()

    def pause(self, paused=True):
        """Stops (or, with `paused` false, resumes) attributing launches to
        the functions found, keeping them."""
        self._register(paused)

    def _register(self, paused=False):
        with self._lock:
            items = [] if paused else list(self._functions.values())
            n = len(items)
            codes = (ctypes.c_size_t * max(n, 1))(*[id(c) for c, _, _ in items])
            names = (ctypes.c_char_p * max(n, 1))(*[name.encode() for _, name, _ in items])
            flags = (ctypes.c_uint32 * max(n, 1))(*[FUNCTION_ROOT if root else 0 for _, _, root in items])
            # The library finds the interpreter's frame layout from three
            # frames, each called by the next, under a call from C (map):
            # the frames a launch sees are of that kind.
            rc = list(map(partial(_calibrating3, self._h, codes, names, flags, n, self.levels), [0]))[0]
            if rc != 0 and n > 0:
                self.error = (self._h.gpuscope_last_error() or b"").decode("utf-8", "replace")
                print(f"gpuscope: module ranges from the Python stack are off: {self.error}", file=sys.stderr)
                # Whatever was registered before goes too: off means off.
                self._h.gpuscope_python_functions(None, None, None, 0, 1, None, 0, 0)
                self._functions.clear()
                for which in range(len(self._handles)):
                    self._stop(which)


def _calibrating1(h, codes, names, flags, n, levels):
    # `h` is this frame's first local: the library finds where frames keep
    # their locals from its address.
    f = sys._getframe()
    here = []
    while f is not None and len(here) < 3:
        here.append(id(f.f_code))
        f = f.f_back
    arr = (ctypes.c_size_t * 3)(*here)
    return h.gpuscope_python_functions(codes, names, flags, n, levels, arr, 3, id(h))


def _calibrating2(*a):
    return _calibrating1(*a)


def _calibrating3(h, codes, names, flags, n, levels, _item):
    return _calibrating2(h, codes, names, flags, n, levels)


def parse_depth(text, variable="GPUSCOPE_TORCH_RANGES"):
    """`on`/`auto` (or unset, where the hooks were asked for): default depth
    ("auto"); N or depth=N (1 or more): N module levels; `stack` or
    `stack=N`: ("stack", "auto" or N), modules from the Python stack
    (`StackModules`); `0`/`off` or empty (the default, as for every
    setting): no ranges (None)."""
    if text is None:
        return "auto"
    t = text.strip().lower()
    if t == "stack" or t.startswith("stack="):
        d = "auto" if t == "stack" else parse_depth(t[6:], variable)
        if d is None or d == "auto" and t != "stack":
            raise ValueError(f"{variable}={text!r}: stack=N takes a depth of 1 or more")
        return ("stack", d)
    if t in ("on", "true", "auto", "yes"):
        return "auto"
    if t in ("", "0", "off", "false", "no"):
        return None
    if t.startswith("depth="):
        t = t[6:]
    try:
        d = int(t)
    except ValueError:
        raise ValueError(f"{variable}={text!r}: allowed: on/auto (default depth), N or depth=N (N module levels, "
                         "1 or more), stack or stack=N (modules from the Python stack at each launch), off/0") from None
    if d < 1:
        raise ValueError(f"{variable}={text!r}: a depth of 1 or more")
    return d


def install_from_environment():
    """For `gpuscope run --torch-ranges`: installs the hooks once torch is
    imported, as `GPUSCOPE_TORCH_RANGES` says."""
    try:
        depth = parse_depth(os.environ.get("GPUSCOPE_TORCH_RANGES"))
    except ValueError as e:
        print(f"gpuscope: {e}; no automatic ranges", file=sys.stderr)
        return None
    if depth is None:
        return None
    path = os.environ.get("GPUSCOPE_LIB")
    if not path:
        return None
    if isinstance(depth, tuple):
        return StackModules(path, depth=None if depth[1] == "auto" else depth[1]).install()
    ranges = TorchRanges(Library(path), depth=None if depth == "auto" else depth)
    ranges.install()
    if os.environ.get("GPUSCOPE_QUIET", "").strip() not in ("on", "1"):
        atexit.register(lambda: ranges.counted and print(f"gpuscope: {ranges.summary()}", file=sys.stderr))
    return ranges


#: The hooks `install_from_environment` installed (`gpuscope run
#: --torch-ranges`), for `gpuscope.annotate` to reuse.
ACTIVE = None

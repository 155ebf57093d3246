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
  to the chosen depth. Modules without parameters or children (activations,
  dropout) get no range of their own.
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
from functools import partial

FOLLOW = 1
DISCARD = 2
#: Levels of module ranges when no repeated blocks are found.
DEFAULT_DEPTH = 3
#: Root calls after which modules are no longer looked for.
DISCOVERY_CALLS = 3


class Library:
    """gpuscope's C ABI range calls (the backend the hooks drive)."""

    def __init__(self, path):
        h = ctypes.CDLL(path)
        h.gpuscope_range_enter.argtypes = [ctypes.c_char_p, ctypes.c_uint32]
        h.gpuscope_range_exit.argtypes = [ctypes.c_uint32]
        h.gpuscope_range_flops.argtypes = [ctypes.c_double]
        self._enter = h.gpuscope_range_enter
        self._exit = h.gpuscope_range_exit
        self.flops = h.gpuscope_range_flops

    def enter(self, name, follow=False):
        self._enter(name, FOLLOW if follow else 0)

    def exit(self, discard=False):
        self._exit(DISCARD if discard else 0)


def _is_compiling():
    return False


def _graph_task_id():
    return -1


#: torch, once `install` ran (the hooks run on every module call: no
#: import statement there).
_torch = None


def _tensors(args, kwargs=None):
    """The tensors among `args` and `kwargs` values, one level deep."""
    out = []
    for a in args:
        if isinstance(a, _torch.Tensor):
            out.append(a)
        elif isinstance(a, (tuple, list)):
            out.extend(x for x in a if isinstance(x, _torch.Tensor))
        elif isinstance(a, dict):
            out.extend(x for x in a.values() if isinstance(x, _torch.Tensor))
    if kwargs:
        out.extend(x for x in kwargs.values() if isinstance(x, _torch.Tensor))
    return out


def _producers(tensors):
    """Distinct autograd nodes that produced the tensors needing grad."""
    seen, nodes = set(), []
    for t in tensors:
        fn = t.grad_fn if t.requires_grad else None
        if fn is not None and id(fn) not in seen:
            seen.add(id(fn))
            nodes.append(fn)
    return nodes


class _Info:
    """One annotated module: its range name and place in the tree."""

    __slots__ = ("name", "qual", "root", "ancestors", "ranged", "kind", "armed", "calls", "primary")

    def __init__(self, name, qual, root, ancestors, ranged, kind):
        self.name = name.encode()
        self.qual = qual
        self.root = root if root is not None else self
        self.ancestors = ancestors
        self.ranged = ranged
        self.kind = kind
        self.armed = root is not None
        self.calls = 0
        self.primary = False


class _Call:
    """One forward call of a ranged module, until its backward ends."""

    __slots__ = ("info", "bwd_flops", "begun", "pushed", "grad")

    def __init__(self, info, grad):
        self.info = info
        self.grad = grad
        self.bwd_flops = 0.0
        self.begun = False
        self.pushed = False


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


class TorchRanges:
    """Installs the hooks; `backend` has enter(name: bytes, follow),
    exit() and flops(float)."""

    def __init__(self, backend, depth=None, count_flops=True):
        self.lib = backend
        self.depth = depth
        self.count_flops = count_flops
        self._main = threading.main_thread().ident
        self._step = 0  # 0: none open; 1: open; 2: open, its optimizer step done
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
        self.counted = {}  # kind -> modules counted
        self.installed = False

    # ---- the step -------------------------------------------------------

    def _activity(self):
        """A data fetch or training forward on the loop's thread; True when
        it opened a step."""
        if threading.get_ident() != self._main:
            return False
        if self._step == 2:
            self.lib.exit()
            self._step = 0
        return self._open_step()

    def _open_step(self):
        """Opens a step if none is; True when it did."""
        if self._step:
            return False
        self.lib.enter(b"step")
        self._step = 1
        return True

    def close_step(self):
        """Closes a step whose optimizer step is done (or any, at exit)."""
        if threading.get_ident() == self._main and self._step:
            self.lib.exit()
            self._step = 0

    def _optimizer_pre(self, optimizer, args, kwargs):
        if threading.get_ident() != self._main:
            return
        self._optimizer_depth += 1
        if self._optimizer_depth == 1:
            self._open_step()
            self.lib.enter(b"optimizer")

    def _optimizer_post(self, optimizer, args, kwargs):
        if threading.get_ident() != self._main or self._optimizer_depth == 0:
            return
        self._optimizer_depth -= 1
        if self._optimizer_depth == 0:
            self.lib.exit()
            self._step = 2

    # ---- forward --------------------------------------------------------

    def _pre(self, info, module, args, kwargs):
        if _is_compiling() or not info.root.armed:
            return
        if _graph_task_id() != -1:
            # A checkpointed forward re-run inside backward: its time counts
            # for the backward range it runs in, its FLOPs not at all.
            return
        tid = threading.get_ident()
        grad = _torch.is_grad_enabled()
        if info.root is info:
            info.calls += 1
            if info.calls >= DISCOVERY_CALLS:
                self._stop_discovery()
            if grad:
                self._activity()
            elif self._step == 2:
                self.close_step()
        self._flush_pending()
        stack = self._forward.setdefault(tid, [])
        call = _Call(info, grad)
        if info.ranged:
            self.lib.enter(info.name)
            call.pushed = True
        stack.append(call)
        if grad and info.ranged:
            for node in _producers(_tensors(args, kwargs)):
                node.register_prehook(self._ender(call))

    def _post(self, info, module, args, kwargs, output):
        if _is_compiling():
            return
        if not info.root.armed:
            if info.root is info:
                info.armed = True
            return
        if _graph_task_id() != -1:
            # A re-run forward (non-reentrant checkpointing may stop it
            # before this hook: nothing may wait for it).
            return
        stack = self._forward.get(threading.get_ident())
        if not stack:
            return
        call = stack[-1]
        if call.info is not info:
            # An exception unwound calls in between: drop them.
            while stack and stack[-1].info is not info:
                c = stack.pop()
                if c.pushed:
                    self.lib.exit()
            if not stack:
                return
            call = stack[-1]
        if info.kind is not None and self.count_flops:
            self._count(info, module, args, output, stack)
        stack.pop()
        if call.pushed:
            self.lib.exit()
        if _torch.is_grad_enabled() and info.ranged:
            for node in _producers(_tensors((output,))):
                self._pending.append((node, call))
                break
        if info.root is info:
            self._flush_pending()

    def _flush_pending(self):
        """Registers backward beginnings, outer modules first where several
        begin at one node (a module returning its last child's output)."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        pending.sort(key=lambda p: (id(p[0]), len(p[1].info.ancestors)))
        for node, call in pending:
            node.register_prehook(self._beginner(call))

    # ---- FLOPs ----------------------------------------------------------

    def _leaf(self, info, module, args, output):
        """A counted module with no range of its own."""
        if _is_compiling() or not info.root.armed or _graph_task_id() != -1:
            return
        stack = self._forward.get(threading.get_ident())
        if stack:
            self._count(info, module, args, output, stack)

    def _count(self, info, module, args, output, stack):
        x = args[0] if args and isinstance(args[0], _torch.Tensor) else None
        if x is None:
            return
        w = getattr(module, "weight", None)
        if info.kind == "linear":
            fwd = 2.0 * x.numel() * module.out_features
        elif isinstance(output, _torch.Tensor):
            k = 1
            for s in module.kernel_size:
                k *= s
            fwd = 2.0 * output.numel() * (module.in_channels // module.groups) * k
        else:
            return
        self.lib.flops(fwd)
        # Weight and input gradients; a forward without grad inside
        # reentrant checkpointing gets both in backward.
        dgrad = x.requires_grad or not _torch.is_grad_enabled()
        bwd = fwd * (int(dgrad) + int(w is not None and w.requires_grad))
        if bwd:
            self._backward_flops(stack, bwd)

    def _sdpa(self, q, k, v, *args, **kwargs):
        if _is_compiling() or not self.count_flops:
            return
        if _graph_task_id() != -1:
            return
        try:
            lead = 1
            for s in q.shape[:-2]:
                lead *= s
            l, e = q.shape[-2], q.shape[-1]
            s_len, ev = k.shape[-2], v.shape[-1]
        except (AttributeError, IndexError):
            return
        causal = kwargs.get("is_causal", args[2] if len(args) > 2 else False)
        fwd = 2.0 * lead * l * s_len * (e + ev) * (0.5 if causal and l == s_len else 1.0)
        self.lib.flops(fwd)
        self.counted["scaled_dot_product_attention"] = self.counted.get("scaled_dot_product_attention", 0) + 1
        stack = self._forward.get(threading.get_ident())
        if stack and (q.requires_grad or not _torch.is_grad_enabled()):
            self._backward_flops(stack, 2.5 * fwd)

    @staticmethod
    def _backward_flops(stack, flops):
        """Backward FLOPs count when the backward range of the innermost
        ranged call that has one (made with grad on) closes."""
        for c in reversed(stack):
            if (c.pushed and c.grad) or c is stack[0]:
                c.bwd_flops += flops
                return

    # ---- backward -------------------------------------------------------

    def _beginner(self, call):
        def begin(grad_outputs):
            self._begin(call)

        return begin

    def _ender(self, call):
        def end(grad_outputs):
            self._end(call)

        return end

    def _begin(self, call):
        if call.begun:
            return
        tid = threading.get_ident()
        stack = self._backward.get(tid)
        if stack is None:
            stack = self._backward[tid] = []
        if not stack:
            _torch.autograd.Variable._execution_engine.queue_callback(self._backward_done)
        # Ranges still open that are not around this module are done.
        while stack and stack[-1].info not in call.info.ancestors:
            self._close(stack.pop())
        call.begun = True
        info = call.info
        # The model's own backward is the `backward` range around it.
        call.pushed = info.ranged and not (info.root is info and info.primary)
        if call.pushed:
            self.lib.enter(info.name, True)
        stack.append(call)

    def _end(self, call):
        stack = self._backward.get(threading.get_ident())
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
            self.lib.exit()
            call.pushed = False

    def _backward_done(self):
        stack = self._backward.get(threading.get_ident())
        while stack:
            self._close(stack.pop())

    def _backward_call(self, original):
        def backward(*args, **kwargs):
            outer = (threading.get_ident() == self._main and _graph_task_id() == -1
                     and self._backward_depth == 0)
            if not outer:
                return original(*args, **kwargs)
            self._open_step()
            self._backward_depth += 1
            self.lib.enter(b"backward")
            try:
                return original(*args, **kwargs)
            finally:
                self.lib.exit()
                self._backward_depth -= 1

        backward.__wrapped__ = original
        return backward

    # ---- modules --------------------------------------------------------

    def annotate(self, model, depth=None):
        """Ranges for `model`'s forward and backward and its modules to
        `depth` levels (default: see the module). Returns `model`."""
        import torch.nn as nn

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
            kind = None
            if isinstance(m, nn.Linear):
                kind = "linear"
            elif isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
                kind = "conv"
            is_root = root_info is None
            ranged = not container and level <= depth and (is_root or has_params or has_children)
            if is_root:
                name = "forward" if self._primary is None else type(m).__name__
            elif ranged_ancestor is None or ranged_ancestor.qual == "":
                name = qual
            else:
                name = qual[len(ranged_ancestor.qual) + 1:]
            if container:
                info = None
            else:
                info = _Info(name, qual, root_info, ancestors, ranged, kind)
                if is_root:
                    root_info = info
                    info.primary = self._primary is None
                    if info.primary:
                        self._primary = info
                if ranged:
                    self._annotated[id(m)] = info
                    self._handles.append(m.register_forward_pre_hook(partial(self._pre, info), with_kwargs=True))
                    self._handles.append(m.register_forward_hook(partial(self._post, info), with_kwargs=True))
                elif kind is not None and self.count_flops:
                    # Beyond the depth: its FLOPs only, from one hook.
                    self._annotated[id(m)] = info
                    self._handles.append(m.register_forward_hook(partial(self._leaf, info)))
                if kind is not None:
                        self.counted[kind] = self.counted.get(kind, 0) + 1
            child_ranged = info if (info is not None and info.ranged) else ranged_ancestor
            child_ancestors = ancestors | {info} if info is not None and info.ranged else ancestors
            for child_name, child in m.named_children():
                child_qual = f"{qual}.{child_name}" if qual else child_name
                visit(child, child_qual, level if container else level + 1, child_ranged, child_ancestors)

        visit(model, "", 0, None, frozenset())
        return model

    def _discover(self, module, args):
        if _is_compiling() or id(module) in self._known:
            return
        if self._forward.get(threading.get_ident()):
            return
        if next(module.parameters(), None) is None:
            return
        self.annotate(module)
        info = self._annotated.get(id(module))
        if info is not None:
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
        self.installed = True
        _torch = torch
        _is_compiling = torch.compiler.is_compiling
        _graph_task_id = torch._C._current_graph_task_id
        self._handles.append(optim.register_optimizer_step_pre_hook(self._optimizer_pre))
        self._handles.append(optim.register_optimizer_step_post_hook(self._optimizer_post))

        it = dl._BaseDataLoaderIter
        original_next = it.__next__
        ranges = self

        def __next__(self):
            opened = ranges._activity()
            ranges.lib.enter(b"data")
            try:
                batch = original_next(self)
            except StopIteration:
                # The end of the data: no step began.
                ranges.lib.exit(discard=opened)
                if opened:
                    ranges.lib.exit(discard=True)
                    ranges._step = 0
                raise
            except BaseException:
                ranges.lib.exit()
                raise
            ranges.lib.exit()
            return batch

        it.__next__ = __next__
        self._undo.append(lambda: setattr(it, "__next__", original_next))

        original_backward = torch.autograd.backward
        torch.autograd.backward = self._backward_call(original_backward)
        self._undo.append(lambda: setattr(torch.autograd, "backward", original_backward))

        import torch.nn.functional as F

        original_sdpa = F.scaled_dot_product_attention

        def scaled_dot_product_attention(q, k, v, *args, **kwargs):
            ranges._sdpa(q, k, v, *args, **kwargs)
            return original_sdpa(q, k, v, *args, **kwargs)

        F.scaled_dot_product_attention = scaled_dot_product_attention
        self._undo.append(lambda: setattr(F, "scaled_dot_product_attention", original_sdpa))

        if discover:
            self.discover()
        atexit.register(self.close_step)
        return self

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
        self.installed = False

    def summary(self):
        """Which modules' FLOPs were counted, in words."""
        if not self.counted:
            return "no module's FLOPs were counted"
        parts = [f"{n} {k}" for k, n in sorted(self.counted.items()) if k != "scaled_dot_product_attention"]
        if "scaled_dot_product_attention" in self.counted:
            parts.append(f"{self.counted['scaled_dot_product_attention']} scaled_dot_product_attention calls")
        return "model FLOPs counted from " + ", ".join(parts) + (
            " (nn.Linear and nn.Conv1d/2d/3d modules called as modules, F.scaled_dot_product_attention; "
            "not counted: functional matmuls, nn.MultiheadAttention's projections, compiled regions)")


def parse_depth(text, variable="GPUSCOPE_TORCH_RANGES"):
    """`on`/`auto`/empty: default depth ("auto"); N or depth=N (1 or
    more): N module levels; `0`/`off`: no ranges (None)."""
    t = (text or "").strip().lower()
    if t in ("", "on", "true", "auto", "yes"):
        return "auto"
    if t in ("0", "off", "false", "no"):
        return None
    if t.startswith("depth="):
        t = t[6:]
    try:
        d = int(t)
    except ValueError:
        raise ValueError(f"{variable}={text!r}: allowed: on/auto (default depth), N or depth=N (N module levels, "
                         "1 or more), off/0") from None
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
    ranges = TorchRanges(Library(path), depth=None if depth == "auto" else depth)
    ranges.install()
    if os.environ.get("GPUSCOPE_QUIET") != "1":
        atexit.register(lambda: ranges.counted and print(f"gpuscope: {ranges.summary()}", file=sys.stderr))
    return ranges


#: The hooks `install_from_environment` installed (`gpuscope run
#: --torch-ranges`), for `gpuscope.annotate` to reuse.
ACTIVE = None

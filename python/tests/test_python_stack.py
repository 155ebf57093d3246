"""Launches attributed to registered functions on the Python stack: the
library reads this interpreter's frames (its layout found at registration)
with no GIL and no call per function call. Checked through
`gpuscope_python_functions_here`, the path a launch made there would get."""

import ctypes
import functools
import threading
import unittest

from gpuscope import _native
from gpuscope import _torch_ranges as tr


def here(h):
    buf = ctypes.create_string_buffer(512)
    needed = ctypes.c_size_t()
    assert h.gpuscope_python_functions_here(buf, len(buf), ctypes.byref(needed)) == 0
    assert needed.value == len(buf.value)
    return buf.value.decode()


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        return fn(*a, **k)

    return wrapper


class Model:
    def forward(self, h, inner):
        return Block().forward(h, inner)


class Block:
    @traced
    def forward(self, h, inner):
        return _plain(h, inner)


def _plain(h, inner):
    return Leaf().forward(h, inner)


class Leaf:
    def forward(self, h, inner):
        return inner(h)


class Outer:
    def run(self, h, inner):
        return Model().forward(h, inner)


class PythonStackTest(unittest.TestCase):
    def setUp(self):
        self.mods = tr.StackModules(str(_native.library_path()))
        self.h = self.mods._h
        self.h.gpuscope_python_functions_here.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                                          ctypes.POINTER(ctypes.c_size_t)]

    def tearDown(self):
        self.mods.uninstall()
        self.assertEqual(here(self.h), "", "unregistered: nothing")

    def register(self, levels=8, root=True):
        f = self.mods._functions
        for fn, name, r in ((Model.forward, "Model", root), (Block.forward, "Block", False),
                            (Leaf.forward, "Leaf", False), (Outer.run, "Outer", False)):
            code = tr._unwrapped_code(fn)
            f[id(code)] = (code, name, r)
        self.mods.levels = levels
        self.mods._register()
        self.assertIsNone(self.mods.error)

    def test_the_registered_frames_make_the_path_whatever_calls_them(self):
        self.register()
        self.assertEqual(Model().forward(self.h, here), "Model/Block/Leaf",
                         "a decorated forward is found by its own code; unregistered frames are skipped")
        self.assertEqual(here(self.h), "")
        self.assertEqual(list(map(lambda _: Model().forward(self.h, here), [0])), ["Model/Block/Leaf"],
                         "called from C")

        def deep(n):
            return deep(n - 1) if n else Model().forward(self.h, here)

        self.assertEqual(deep(40), "Model/Block/Leaf")
        out = []
        t = threading.Thread(target=lambda: out.append(Model().forward(self.h, here)))
        t.start()
        t.join()
        self.assertEqual(out, ["Model/Block/Leaf"], "on another thread")

    def test_a_root_stops_the_walk_and_levels_keep_the_outermost(self):
        self.register()
        self.assertEqual(Outer().run(self.h, here), "Model/Block/Leaf", "nothing above the root")
        self.mods._functions.clear()
        self.register(root=False)
        self.assertEqual(Outer().run(self.h, here), "Outer/Model/Block/Leaf")
        self.mods._functions.clear()
        self.register(levels=2)
        self.assertEqual(Model().forward(self.h, here), "Model/Block")

    def test_bad_registrations_are_refused_with_what_is_allowed(self):
        h = self.h
        h.gpuscope_python_functions.restype = ctypes.c_int
        code = (ctypes.c_size_t * 1)(id(Model.forward.__code__))
        names = (ctypes.c_char_p * 1)(b"Model")
        flags = (ctypes.c_uint32 * 1)(0)
        few = (ctypes.c_size_t * 2)(id(Model.forward.__code__), id(Block.forward.__code__))
        self.assertEqual(h.gpuscope_python_functions(code, names, flags, 1, 4, few, 2, id(h)), _native.ERR_INVALID)
        self.assertIn(b"3 or more", h.gpuscope_last_error())
        self.assertEqual(h.gpuscope_python_functions(code, names, flags, 1, 0, few, 2, id(h)), _native.ERR_INVALID)
        self.assertIn(b"allowed: 1 to 16", h.gpuscope_last_error())
        bad = (ctypes.c_uint32 * 1)(4)
        self.assertEqual(h.gpuscope_python_functions(code, names, bad, 1, 4, few, 2, id(h)), _native.ERR_INVALID)
        self.assertIn(b"GPUSCOPE_FUNCTION_ROOT", h.gpuscope_last_error())
        # Frames that are not each called by the next: no layout.
        wrong = (ctypes.c_size_t * 3)(id(Leaf.forward.__code__), id(Model.forward.__code__),
                                      id(Block.forward.__code__))
        self.assertEqual(h.gpuscope_python_functions(code, names, flags, 1, 4, wrong, 3, id(h)), _native.ERR_INVALID)
        self.assertIn(b"not recognised", h.gpuscope_last_error())


    def test_a_refused_registration_turns_attribution_off(self):
        self.register()
        self.assertEqual(Model().forward(self.h, here), "Model/Block/Leaf")
        for i in range(5000):
            code = compile(f"x = {i}", "<probe>", "exec")
            self.mods._functions[id(code)] = (code, f"f{i}", False)
        self.mods._register()
        self.assertIn("at most 4096", self.mods.error)
        self.assertEqual(Model().forward(self.h, here), "", "off means off")

    def test_equal_code_objects_of_two_classes_are_two_functions(self):
        src = "def forward(self, h, inner):\n    return inner(h)\n"
        a, b = {}, {}
        exec(compile(src, "<same>", "exec"), a)
        exec(compile(src, "<same>", "exec"), b)
        self.assertEqual(a["forward"].__code__, b["forward"].__code__)
        f = self.mods._functions
        f[id(a["forward"].__code__)] = (a["forward"].__code__, "A", False)
        f[id(b["forward"].__code__)] = (b["forward"].__code__, "B", False)
        self.mods._register()
        self.assertEqual(b["forward"](None, self.h, here), "B")
        self.assertEqual(a["forward"](None, self.h, here), "A")


class StackSettingTest(unittest.TestCase):
    def test_stack_values_parse_and_bad_ones_name_what_is_allowed(self):
        from gpuscope import _api

        self.assertEqual(tr.parse_depth("stack"), ("stack", "auto"))
        self.assertEqual(tr.parse_depth(" Stack=3 "), ("stack", 3))
        for bad in ("stack=0", "stack=on", "stack=x"):
            with self.assertRaises(ValueError) as e:
                tr.parse_depth(bad)
            self.assertIn("GPUSCOPE_TORCH_RANGES=", str(e.exception))
        self.assertEqual(_api._torch_depth("stack"), ("stack", "auto"))
        self.assertEqual(_api._torch_depth(("stack", 2)), ("stack", 2))
        for bad in (("stack", 0), ("stack", True), "stacks"):
            with self.assertRaises(ValueError) as e:
                _api._torch_depth(bad)
            self.assertIn("stack", str(e.exception))


if __name__ == "__main__":
    unittest.main()

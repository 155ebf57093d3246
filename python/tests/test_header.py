"""The Python package's copy of the C ABI (`gpuscope._native`: return codes,
modes, formats, the config struct) against the committed header
`ffi/include/gpuscope.h`, which a Rust test keeps equal to the library's
code: a constant or field added on one side only fails here."""

import ctypes
import re
import unittest
from pathlib import Path

from gpuscope import _native

HEADER = Path(__file__).resolve().parents[2] / "ffi" / "include" / "gpuscope.h"
C_TYPES = {"uint32_t": ctypes.c_uint32, "const char *": ctypes.c_char_p, "int": ctypes.c_int}


def header():
    return HEADER.read_text()


def defines(prefix):
    return {m.group(1): int(m.group(2)) for m in re.finditer(rf"#define GPUSCOPE_{prefix}(\w+) (\d+)", header())}


class Header(unittest.TestCase):
    def test_return_codes_are_the_header_s(self):
        ok = int(re.search(r"#define GPUSCOPE_OK (\d+)", header()).group(1))
        self.assertEqual(_native.OK, ok)
        codes = defines("ERR_")
        self.assertTrue(codes, "no GPUSCOPE_ERR_* in the header")
        mine = {n[len("ERR_"):]: getattr(_native, n) for n in dir(_native) if n.startswith("ERR_")}
        self.assertEqual(mine, codes, "a code differs or exists on one side only")

    def test_modes_and_formats_are_the_header_s(self):
        self.assertEqual({k.upper(): v for k, v in _native.MODES.items()}, defines("MODE_"))
        self.assertEqual({k.upper(): v for k, v in _native.FORMATS.items()}, defines("FORMAT_"))

    def test_launch_count_all_is_the_header_s(self):
        self.assertIn("#define GPUSCOPE_LAUNCH_COUNT_ALL UINT32_MAX", header())
        self.assertEqual(_native.LAUNCH_COUNT_ALL, 2**32 - 1)

    def test_the_config_struct_has_the_header_s_fields_in_order(self):
        body = re.search(r"typedef struct \{(.*?)\} gpuscope_config;", header(), re.S).group(1)
        fields = []
        for line in body.splitlines():
            line = line.split("//")[0].strip()
            m = re.match(r"(.+?)\s*\b(\w+);$", line)
            if m:
                fields.append((m.group(2), C_TYPES[m.group(1).strip()]))
        self.assertEqual(_native.Config._fields_, fields)

    def test_every_function_the_package_calls_is_in_the_header(self):
        # Library functions are reached as attributes of the loaded library.
        package = Path(_native.__file__).parent
        lib_calls = set()
        for source in ("_native.py", "_api.py", "_torch_ranges.py"):
            lib_calls |= set(re.findall(r"\.(gpuscope_\w+)", (package / source).read_text()))
        self.assertIn("gpuscope_range_enter", lib_calls)
        declared = set(re.findall(r"\b(gpuscope_\w+)\(", header()))
        self.assertTrue(declared, "no functions found in the header")
        self.assertEqual(lib_calls - declared, set())


if __name__ == "__main__":
    unittest.main()

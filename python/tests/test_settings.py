"""The settings of `gpuscope.profile` against the C ABI's: Python's defaults
are the library's (`gpuscope_config_init`), every keyword reaches its field,
and the library checks values as it does for C (a Rust test checks the
keywords against docs/reference/configuration.md)."""

import ctypes
import unittest

import gpuscope
from gpuscope import _native

SWITCHES = ("device_memory", "memory_records", "sync_records", "launch_attribution", "cross_thread_ranges")
COUNTS = ("launch_count", "every", "keep_trace", "sampling_interval_us", "buffer_size", "max_buffers", "host_queue",
          "max_live_ranges")


def fields(cfg):
    return {name: getattr(cfg, name) for name, _ in _native.Config._fields_}


def library_defaults():
    cfg = _native.Config()
    _native.check(_native.init_config(cfg))
    return fields(cfg)


class Settings(unittest.TestCase):
    def test_python_s_defaults_are_the_library_s(self):
        self.assertEqual(fields(gpuscope.profile()._config()), library_defaults())

    def test_every_keyword_reaches_its_field(self):
        values = {name: 2 + i for i, name in enumerate(COUNTS)}
        cfg = gpuscope.profile(mode="metrics", metrics="dram", kernel_filter="gemm", nvtx_filter="train",
                               prometheus=":9400", **values, **{name: False for name in SWITCHES})._config()
        got = fields(cfg)
        self.assertEqual({name: got[name] for name in COUNTS}, values)
        self.assertEqual({name: got[name] for name in SWITCHES}, {name: 0 for name in SWITCHES})
        self.assertEqual((got["mode"], got["metrics"], got["kernel_filter"], got["nvtx_filter"], got["prometheus"]),
                         (_native.MODES["metrics"], b"dram", b"gemm", b"train", b":9400"))

    def test_other_settings_go_by_name_and_the_library_checks_them(self):
        cfg = gpuscope.profile(quiet=True, host_queue=4096)._config()
        self.assertEqual(cfg.settings, b"quiet=on")
        self.assertEqual(cfg.host_queue, 4096, "a keyword of its own still sets its field")
        with self.assertRaises(gpuscope.GpuscopeError) as e:
            gpuscope.profile(sync_record=False).start()
        self.assertEqual(e.exception.code, _native.ERR_INVALID)
        self.assertIn('profile() keyword: "sync_record" is not a setting given by name (did you mean sync_records?)',
                      str(e.exception))
        with self.assertRaisesRegex(gpuscope.GpuscopeError,
                                    r'profile\(\) keyword calibrate="maybe" is not valid; allowed: on, off'):
            gpuscope.profile(calibrate="maybe").start()
        with self.assertRaisesRegex(ValueError, r"quiet=2.5 is not valid; allowed: True, False or a whole number"):
            gpuscope.profile(quiet=2.5)

    def test_launch_count_all_is_the_library_s_constant(self):
        cfg = gpuscope.profile(mode="metrics", launch_count="all")._config()
        self.assertEqual(cfg.launch_count, _native.LAUNCH_COUNT_ALL)

    def test_bad_values_are_refused_as_in_c_naming_the_setting(self):
        for kwargs, says in [
            (dict(max_buffers=0), "max_buffers = 0 is out of range; allowed: buffers, 1 to 1024"),
            (dict(prometheus="9400"), 'prometheus = "9400" is not valid; allowed: HOST:PORT'),
        ]:
            with self.assertRaises(gpuscope.GpuscopeError, msg=kwargs) as e:
                gpuscope.profile(**kwargs).start()
            self.assertEqual(e.exception.code, _native.ERR_INVALID)
            self.assertIn(says, str(e.exception))
        with self.assertRaisesRegex(ValueError, r"sync_records='no'; allowed: True or False"):
            gpuscope.profile(sync_records="no")
        with self.assertRaisesRegex(ValueError, r"every='often' is not valid; allowed: 0 to 4294967295"):
            gpuscope.profile(every="often")._config()
        # Not rounded or read as 1: refused.
        for value in (2.5, True, "4"):
            with self.assertRaisesRegex(ValueError, rf"every={value!r} is not valid; allowed: 0 to 4294967295"):
                gpuscope.profile(every=value)._config()
        # Python's own names, and "all" among what is allowed.
        for value in (0, "alll", -3):
            with self.assertRaisesRegex(ValueError, rf"launch_count={value!r} is not valid; allowed: 1 or more, or 'all'"):
                gpuscope.profile(mode="metrics", launch_count=value)._config()

    def test_a_snapshot_needs_a_running_session(self):
        with self.assertRaises(gpuscope.GpuscopeError) as e:
            gpuscope.profile().snapshot()
        self.assertEqual(e.exception.code, _native.ERR_STATE)


if __name__ == "__main__":
    unittest.main()

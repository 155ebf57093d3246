"""`gpuscope` (and `python -m gpuscope`): the packaged program, told where
the packaged library is."""

import os
import sys

from ._native import command_path, library_path, native_env


def main():
    exe = command_path()
    if not exe.exists():
        sys.exit(f"gpuscope: the gpuscope program is missing from this installation ({exe}); reinstall the wheel")
    env = native_env(dict(os.environ))
    env.setdefault("GPUSCOPE_LIB", str(library_path()))
    os.execve(str(exe), [str(exe)] + sys.argv[1:], env)


if __name__ == "__main__":
    main()

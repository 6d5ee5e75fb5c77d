"""Run by tests/test_child_process.py as a child of `run_module`: prints its death signal."""

import ctypes

if __name__ == "__main__":
    libc = ctypes.CDLL(None)
    value = ctypes.c_int()
    libc.prctl(2, ctypes.byref(value), 0, 0, 0)  # 2 = PR_GET_PDEATHSIG
    print(value.value)

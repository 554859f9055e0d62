"""fp4scope from Python: captures through the C writer (ctypes over
libfp4scope.so; no pip install: put tools/python on sys.path, and set
FP4SCOPE_LIB if the library is not in the source tree's build directory)."""
from ._lib import FP4SError, lib
from .capture import CONST_STEP, Capture, rank_path
from .functional import capture_gemms, expert_site, hook_modules
from .quant import fake_quant

__all__ = ["Capture", "CONST_STEP", "FP4SError", "capture_gemms", "expert_site", "fake_quant", "hook_modules", "lib",
           "rank_path"]

"""../shared/tools/make_perf_gguf.py (or $PERF_GGUF_TOOL) loaded as a module, for the perf-model scripts beside
this one: they reuse its weight generators and GGUF writer."""
import importlib.util
import os
import sys


def load(caller):
    path = os.environ.get("PERF_GGUF_TOOL") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                            "shared", "tools", "make_perf_gguf.py")
    if not os.path.exists(path):
        sys.exit("%s: %s not found (set PERF_GGUF_TOOL)" % (caller, path))
    spec = importlib.util.spec_from_file_location("make_perf_gguf", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

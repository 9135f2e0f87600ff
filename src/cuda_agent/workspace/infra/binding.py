"""Protected file: do not edit. Gives model_new.py the functions that kernels/*.cu export with CA_EXPORT.

    from binding import ops
    ops.my_function(x, out)

Importing this builds kernels/ if anything changed (1-2 s a file) and loads the library.
"""
from cuda_agent.compiler.runtime import load_ops

ops = load_ops(__file__)

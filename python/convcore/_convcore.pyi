# The bindings (python/bindings/*.cpp, compiled into _convcore): a partial stub that
# types every attribute Any, so that type checkers see the module; convcore._api and the modules
# beside it wrap each binding in a typed function. (A stub generated from the bindings, e.g. by
# pybind11-stubgen, would replace this one.)
from typing import Any

def __getattr__(name: str) -> Any: ...

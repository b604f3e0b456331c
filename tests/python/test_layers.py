"""Layers that depend downwards only: cpp/core (descriptors, validation, plans, selection, the
registry) includes nothing from the device backends beside it (cpp/cpu, cpp/cuda). What the core
asks of a backend it declares itself (core/device.hpp, core/solver.hpp); the backends define it,
and the registry (core/registry.cpp) names their solvers from algorithms.def.

STILL_INCLUDES lists a core file that may include a backend header while it waits to be moved
(none now)."""
import os
import re

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CORE = os.path.join(ROOT, "cpp", "core")
# core file: the backend headers it may still include
STILL_INCLUDES = {}


def backend_includes(path):
    with open(path) as f:
        return set(re.findall(r'^\s*#\s*include\s+"((?:cpu|cuda)/[^"]+)"', f.read(), re.M))


def test_the_core_includes_no_backend_header():
    found = {}
    for name in sorted(os.listdir(CORE)):
        path = os.path.join(CORE, name)
        if os.path.isfile(path) and name.endswith((".cpp", ".hpp", ".h")):
            extra = backend_includes(path) - STILL_INCLUDES.get(name, set())
            if extra:
                found[name] = sorted(extra)
    assert not found, f"cpp/core includes backend headers: {found} (declare what the core needs in core/device.hpp)"


def test_the_allowed_list_is_current():
    """An entry that no longer includes what it may is removed from STILL_INCLUDES."""
    for name, allowed in STILL_INCLUDES.items():
        assert backend_includes(os.path.join(CORE, name)) == allowed, name

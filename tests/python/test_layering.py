"""The layers of docs/CONTRIBUTING.md, checked on the sources: every #include and
every CMake link stays on an allowed arrow, nothing above the runtime asks
which driver runs, and only the sim driver asks the host for its caches. A new
file is checked the day it is added."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CSRC = ROOT / "csrc"

# Layer -> the layers its files may include (itself included). The sim driver's
# folder is inside the runtime's, so it is named first: a file belongs to the
# first layer whose folder holds it.
LAYERS = {
    "sim": ("runtime/sim", {"sim", "runtime", "isa"}),
    "isa": ("isa", {"isa"}),
    "runtime": ("runtime", {"runtime", "isa"}),
    "compiler": ("compiler", {"compiler", "isa"}),
    "recipes": ("recipes", {"recipes", "isa"}),
    "torch": ("torch", {"torch", "runtime", "compiler", "recipes", "isa"}),
    "distributed": ("distributed", {"distributed", "torch", "runtime", "isa"}),
    "python": ("python", {"python", "distributed", "torch", "runtime", "compiler", "recipes", "isa"}),
}

# CMake target -> layer, for the link check.
TARGETS = {
    "pto_isa": "isa",
    "pto_runtime": "runtime",
    "pto_sim": "sim",
    "pto_compiler": "compiler",
    "pto_recipes": "recipes",
    "pto_torch": "torch",
    "pto_distributed": "distributed",
    "pto_transport_shm": "distributed",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def layer_of(path: Path) -> str | None:
    relative = path.relative_to(CSRC).as_posix()
    for layer, (folder, _) in LAYERS.items():
        if relative.startswith(folder + "/"):
            return layer
    return None


def sources():
    return sorted(p for p in CSRC.rglob("*") if p.suffix in {".h", ".cpp", ".def"})


def resolve(including: Path, name: str) -> Path | None:
    """The file an #include "name" means: beside the including file, else from csrc/."""
    for base in (including.parent, CSRC):
        candidate = (base / name).resolve()
        if candidate.is_file():
            return candidate
    return None


def include_violations():
    for path in sources():
        layer = layer_of(path)
        if layer is None:
            continue
        allowed = LAYERS[layer][1]
        for name in INCLUDE.findall(path.read_text()):
            target = resolve(path, name)
            if target is None or CSRC not in target.parents:
                continue  # a library header (torch, gtest) or a generated one
            target_layer = layer_of(target)
            if target_layer not in allowed:
                yield f"{path.relative_to(ROOT)} ({layer}) includes {name} ({target_layer})"


def test_every_include_stays_on_an_allowed_arrow():
    assert list(include_violations()) == []


def test_the_layer_check_sees_a_forbidden_include(tmp_path, monkeypatch):
    """The check itself: a compiler file reaching into the sim driver is caught."""
    fake = tmp_path / "csrc"
    (fake / "compiler").mkdir(parents=True)
    (fake / "runtime" / "sim" / "kernels").mkdir(parents=True)
    (fake / "runtime" / "sim" / "kernels" / "execute.h").write_text("#pragma once\n")
    (fake / "compiler" / "sneaky.cpp").write_text('#include "runtime/sim/kernels/execute.h"\n')
    monkeypatch.setattr(sys.modules[__name__], "CSRC", fake)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert list(include_violations()) == [
        "csrc/compiler/sneaky.cpp (compiler) includes runtime/sim/kernels/execute.h (sim)"]


def cmake_links():
    """(target, linked target) for every target_link_libraries of a layer's target."""
    text = "\n".join(p.read_text() for p in [ROOT / "CMakeLists.txt", *CSRC.rglob("CMakeLists.txt")])
    for target, body in re.findall(r"target_link_libraries\((\w+)\s+([^)]*)\)", text):
        if target in TARGETS:
            for linked in re.findall(r"\bpto_\w+", body):
                yield target, linked


def test_every_layer_target_links_only_layers_it_may_use():
    bad = [f"{target} links {linked}" for target, linked in cmake_links()
           if linked in TARGETS and TARGETS[linked] not in LAYERS[TARGETS[target]][1]]
    assert bad == []
    assert {t for t, _ in cmake_links()} >= {"pto_runtime", "pto_sim", "pto_compiler", "pto_recipes", "pto_torch"}


@pytest.mark.parametrize("folder", ["csrc/torch", "csrc/compiler", "csrc/distributed", "csrc/python", "pypto_torch"])
def test_nothing_above_the_runtime_asks_which_driver_runs(folder):
    """Capabilities (ptoDeviceGetAttribute) decide; the driver's name is only shown
    to people (torch.pto.get_device_name)."""
    asks = re.compile(r'(ptoGetDriverName\(\)|_driver_name\(\))\s*[=!]=|[=!]=\s*"sim"|"sim"\s*[=!]=')
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / folder).rglob("*")
                 if p.suffix in {".cpp", ".h", ".py"} and asks.search(p.read_text())]
    assert offenders == []


def test_the_compiler_package_names_no_instruction():
    """What an aten op becomes is its recipe's (csrc/recipes), read through _C._recipe:
    no PTO mnemonic is spelled in pypto_torch/compile/, so a recipe changes in one place."""
    sys.path.insert(0, str(ROOT))
    from pypto_torch import _C

    mnemonics = {row["mnemonic"] for row in _C._isa_table()}
    quoted = re.compile(r"""["']([a-z0-9]+)["']""")
    offenders = sorted(f"{p.relative_to(ROOT)}: {word}" for p in (ROOT / "pypto_torch" / "compile").rglob("*.py")
                       for word in quoted.findall(p.read_text()) if word in mnemonics)
    assert offenders == []


# The host's caches are the sim driver's to read (its cores are the host's); every
# other layer takes the tuning a device reports (ptoDeviceGetAttribute,
# CompileOptions), so that a schedule never depends on the machine that compiled it.
HOST_CACHE_QUERY = re.compile(r"/sys/devices/system/cpu|_SC_LEVEL\d|cpuid")


def host_cache_queries():
    sim = CSRC / "runtime" / "sim"
    candidates = [*CSRC.rglob("*"), *(ROOT / "pypto_torch").rglob("*.py")]
    for path in sorted(candidates):
        if path.suffix not in {".h", ".cpp", ".def", ".py"} or sim in path.parents:
            continue
        if HOST_CACHE_QUERY.search(path.read_text()):
            yield str(path.relative_to(ROOT))


def test_only_the_sim_driver_asks_the_host_for_its_caches():
    assert list(host_cache_queries()) == []


def test_the_cache_query_check_sees_a_sysfs_read_outside_the_sim(tmp_path, monkeypatch):
    """The check itself: the compiler reading sysfs is caught, the sim doing so is not."""
    fake = tmp_path / "csrc"
    (fake / "compiler").mkdir(parents=True)
    (fake / "runtime" / "sim").mkdir(parents=True)
    (tmp_path / "pypto_torch").mkdir()
    read = 'std::ifstream size("/sys/devices/system/cpu/cpu0/cache/index2/size");\n'
    (fake / "compiler" / "sneaky.cpp").write_text(read)
    (fake / "runtime" / "sim" / "host_caches.cpp").write_text(read + "long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);\n")
    (tmp_path / "pypto_torch" / "tuning.py").write_text("import cpuid\n")
    monkeypatch.setattr(sys.modules[__name__], "CSRC", fake)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert list(host_cache_queries()) == ["csrc/compiler/sneaky.cpp", "pypto_torch/tuning.py"]


SILENT_DEFAULT = re.compile(r"default\s*:\s*(\{\s*)?return\s*;")


def silent_defaults(folder: Path) -> list[str]:
    """Files under `folder` where a switch's default case returns having done nothing."""
    return [str(p.relative_to(ROOT)) for p in sorted(folder.rglob("*"))
            if p.suffix in {".cpp", ".h"} and SILENT_DEFAULT.search(p.read_text())]


def test_the_sims_dispatch_never_skips_an_instruction_silently():
    """The sim picks each instruction's kernel from the instruction table (kernels/execute.h,
    opcode_dispatch.h), so an instruction without one fails the build; a `default: return;`
    would let it write nothing instead."""
    assert silent_defaults(CSRC / "runtime" / "sim") == []


def test_the_silent_default_check_sees_one(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "row_ops.cpp").write_text("switch (opcode) {\n  case kSoftmax: run();\n  default: return;\n}\n")
    assert silent_defaults(tmp_path) == ["row_ops.cpp"]

"""The cache census (module_utils/cache_census.py) and its module, against a site-packages tree built
here. SGLang's registry is a stand-in (``STAND_IN_ENVIRON``): the real sglang/srt/environ.py comes
with the 39 MB SGLang wheel, which the unit tests do not install; it has the same shape (EnvField,
EnvStr, a class Envs whose fields take their names from __set_name__, callable defaults under
SGLANG_CACHE_DIR, a hard-coded None for SGLANG_JIT_CACHE_DIR, third_party_cache_defaults()).
The real one is read by every Molecule converge and on the lab (the census task of the
kernel_cache role).
"""

import json
import os
import sys

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.filter.flashinfer import kernel_cache_environment
from ansible_collections.blackwell.sglang.plugins.module_utils import cache_census, verified
from ansible_collections.blackwell.sglang.plugins.module_utils.preflight import managed_env_problem
from ansible_collections.blackwell.sglang.plugins.module_utils.role_checks import kernel_cache_problems
from ansible_collections.blackwell.sglang.plugins.modules import kernel_cache_census

import module_runner

STAND_IN_ENVIRON = '''
import os


def _default_cache_subdir(name):
    return os.path.join(os.path.expanduser(envs.SGLANG_CACHE_DIR.get()), name)


class EnvField:
    def __init__(self, default):
        self.default = default

    def __set_name__(self, owner, name):
        self.name = name

    def get(self):
        value = os.getenv(self.name)
        if value is None:
            return self.default() if callable(self.default) else self.default
        return value


class EnvStr(EnvField):
    pass


class EnvBool(EnvField):
    pass


class Envs:
    SGLANG_DG_CACHE_DIR = EnvStr(lambda: _default_cache_subdir("deep_gemm"))
    SGLANG_CACHE_DIR = EnvStr(os.path.expanduser("~/.cache/sglang"))
    SGLANG_CUTE_AOT_CACHE_DIR = EnvStr(lambda: _default_cache_subdir("cute_aot"))
    SGLANG_JIT_CACHE_DIR = EnvStr(None)
    SGLANG_QWEN4_PLE_FILE_DIR = EnvStr(lambda: _default_cache_subdir("ple"))
    SGLANG_TORCH_PROFILER_DIR = EnvStr("/tmp")
    SGLANG_HTTP_SERVER_APP_PATH = EnvStr("sglang.srt.entrypoints.http_server:app")
    SGLANG_CRASH_ON_JIT_COMPILE = EnvBool(False)


envs = Envs()


def third_party_cache_defaults():
    base = os.path.expanduser(envs.SGLANG_CACHE_DIR.get())
    return {"TRITON_CACHE_DIR": os.path.join(base, "triton"), "CUDA_CACHE_PATH": os.path.join(base, "nv"),
            "FLASHINFER_WORKSPACE_BASE": base}
'''


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def site(tmp_path):
    """A site-packages with SGLang's registry (the stand-in), and packages that read caches the way
    the real ones do (quack, CuTe DSL) or that only name a download (tiktoken)."""
    root = tmp_path / "site-packages"
    write(root / "sglang" / "srt" / "environ.py", STAND_IN_ENVIRON)
    write(root / "quack" / "cache" / "__init__.py", 'import os\nCACHE_DIR = os.getenv("QUACK_CACHE_DIR", None)\n')
    write(root / "cutlass" / "base_dsl" / "cache_helpers.py", "import os\nP = os.getenv('CUTE_DSL_CACHE_DIR', None)\n")
    write(root / "tiktoken" / "load.py", 'import os\nD = os.environ.get("TIKTOKEN_CACHE_DIR")\n')
    write(root / "noise" / "__init__.py", 'EMPTY_CACHE = "EMPTY_CACHE"\nX = "not_a_CACHE_DIR"\n')
    return root


@pytest.fixture
def workspace(tmp_path):
    path = tmp_path / "kernel-caches" / "03cc642be31cb6ed"
    path.mkdir(parents=True)
    return str(path)


@pytest.fixture
def placed(monkeypatch, workspace, tmp_path):
    """The environment the kernel_cache role writes (the venv's env file), and a home of its own."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in list(os.environ):
        if name in cache_census.LOCATIONS:
            monkeypatch.delenv(name)
    for name, value in cache_census.environment(workspace).items():
        monkeypatch.setenv(name, value)


# ---- the table and the environment ---------------------------------------------------------------

def test_every_cache_of_the_table_is_placed_in_the_workspace(workspace):
    env = cache_census.environment(workspace)
    assert set(env) == set(cache_census.LOCATIONS)
    assert env["FLASHINFER_WORKSPACE_BASE"] == workspace
    assert env["SGLANG_CACHE_DIR"] == workspace + "/sglang"
    assert env["SGLANG_JIT_CACHE_DIR"] == workspace + "/sglang/jit"
    for name, path in env.items():
        assert cache_census.inside(path, workspace), name
        assert not path.startswith("/tmp/") or workspace.startswith("/tmp/"), name
    # no two caches of different libraries share a directory, but DeepGEMM's two names of one cache
    by_path = {}
    for name, path in env.items():
        by_path.setdefault(path, []).append(name)
    assert {tuple(sorted(names)) for names in by_path.values() if len(names) > 1} == {("DG_JIT_CACHE_DIR", "SGLANG_DG_CACHE_DIR")}


def test_the_environment_of_a_workspace_with_a_trailing_slash_is_the_same(workspace):
    assert cache_census.environment(workspace + "/") == cache_census.environment(workspace)


def test_the_operator_adds_a_cache(workspace):
    env = cache_census.environment(workspace, {"MYLIB_CACHE_DIR": "mylib"})
    assert env["MYLIB_CACHE_DIR"] == workspace + "/mylib"
    assert list(env)[-1] == "MYLIB_CACHE_DIR"


@pytest.mark.parametrize("extra, words", [
    ({"TRITON_CACHE_DIR": "elsewhere"}, ["TRITON_CACHE_DIR is placed by the collection (triton)"]),
    ({"MYLIB_CACHE_DIR": "/var/cache/mylib"}, ["MYLIB_CACHE_DIR", "relative directory"]),
    ({"MYLIB_CACHE_DIR": "../other-venv/mylib"}, ["MYLIB_CACHE_DIR", "no '..'"]),
    ({"MYLIB_CACHE_DIR": 5}, ["MYLIB_CACHE_DIR", "relative directory"]),
    ({"PATH": "bin"}, ["PATH is not named like a cache location"]),
])
def test_bad_locations_are_refused(workspace, extra, words):
    with pytest.raises(cache_census.CensusError) as error:
        cache_census.environment(workspace, extra)
    for word in words:
        assert word in str(error.value)
    assert str(error.value).startswith("kernel_cache_locations: ")
    with pytest.raises(AnsibleFilterError):
        kernel_cache_environment(workspace, extra)
    assert any(words[0] in problem for problem in kernel_cache_problems(
        {"kernel_cache_dir": "/var/lib/sglang/kernel-caches", "kernel_cache_flashinfer_env_file": "/etc/sglang/flashinfer.env",
         "kernel_cache_locations": extra}))


def test_the_role_checks_refuse_locations_and_exemptions_that_are_no_dicts():
    base = {"kernel_cache_dir": "/var/lib/sglang/kernel-caches", "kernel_cache_flashinfer_env_file": "/etc/sglang/flashinfer.env"}
    assert kernel_cache_problems(dict(base, kernel_cache_locations={"MYLIB_CACHE_DIR": "mylib"},
                                      kernel_cache_census_exempt={"HF_CACHE_DIR": "model downloads"})) == []
    problems = kernel_cache_problems(dict(base, kernel_cache_locations=["MYLIB_CACHE_DIR"], kernel_cache_census_exempt={"X_CACHE_DIR": ""}))
    assert any(p.startswith("kernel_cache_locations must be a dict") for p in problems)
    assert any(p.startswith("kernel_cache_census_exempt must be a dict") for p in problems)
    assert kernel_cache_problems(dict(base, kernel_cache_triton_ptxas="toolkit")) == []
    assert kernel_cache_problems(dict(base, kernel_cache_triton_ptxas="cuda")) == [
        'kernel_cache_triton_ptxas must be triton (Triton\'s bundled ptxas) or toolkit (the CUDA home\'s), got "cuda"']


# ---- the census ---------------------------------------------------------------------------------

def test_the_census_passes_where_the_role_placed_every_cache(site, workspace, placed):
    result = cache_census.census(workspace, [str(site)])
    assert result["unplaced"] == {} and result["misplaced"] == {}
    assert cache_census.problem(result, workspace) is None
    assert result["declared"]["QUACK_CACHE_DIR"] == "quack/cache/__init__.py"
    assert result["declared"]["CUTE_DSL_CACHE_DIR"] == "cutlass/base_dsl/cache_helpers.py"
    assert result["placed"]["QUACK_CACHE_DIR"] == workspace + "/quack"
    # SGLang's own resolve by its own code: lazily under SGLANG_CACHE_DIR, set or not
    assert result["sglang"]["SGLANG_CUTE_AOT_CACHE_DIR"] == workspace + "/sglang/cute_aot"
    assert result["placed"]["SGLANG_CUTE_AOT_CACHE_DIR"] == workspace + "/sglang/cute_aot"
    assert result["sglang"]["SGLANG_JIT_CACHE_DIR"] == workspace + "/sglang/jit"
    # a computed default under SGLANG_CACHE_DIR, though not named like a cache
    assert result["placed"]["SGLANG_QWEN4_PLE_FILE_DIR"] == workspace + "/sglang/ple"
    # not a cache location: neither a path-named field nor a computed default
    assert "SGLANG_TORCH_PROFILER_DIR" not in result["sglang"] and "SGLANG_HTTP_SERVER_APP_PATH" not in result["sglang"]
    assert "EMPTY_CACHE" not in result["declared"] and "not_a_CACHE_DIR" not in result["declared"]
    assert result["exempt"] == {"TIKTOKEN_CACHE_DIR": cache_census.NOT_KERNEL_CACHES["TIKTOKEN_CACHE_DIR"]}
    assert result["files"] == 5


def test_without_the_role_sglang_caches_land_in_the_home(site, workspace, tmp_path, monkeypatch):
    """What the issue found on the lab: SGLANG_CACHE_DIR unset, its caches in the service user's home,
    SGLang's JIT kernels at a hard-coded default, CuTe DSL's nowhere the role knows."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in cache_census.LOCATIONS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", workspace)
    result = cache_census.census(workspace, [str(site)])
    home = str(tmp_path / "home")
    assert result["misplaced"]["SGLANG_CACHE_DIR"] == "SGLANG_CACHE_DIR=%s/.cache/sglang (its default)" % home
    assert result["misplaced"]["SGLANG_CUTE_AOT_CACHE_DIR"] == "SGLANG_CUTE_AOT_CACHE_DIR=%s/.cache/sglang/cute_aot (its default)" % home
    assert result["misplaced"]["SGLANG_QWEN4_PLE_FILE_DIR"] == "SGLANG_QWEN4_PLE_FILE_DIR=%s/.cache/sglang/ple (its default)" % home
    assert result["misplaced"]["CUDA_CACHE_PATH"] == "CUDA_CACHE_PATH=%s/.cache/sglang/nv (its default)" % home
    assert result["unplaced"] == {"SGLANG_JIT_CACHE_DIR": "sglang/srt/environ.py", "QUACK_CACHE_DIR": "quack/cache/__init__.py",
                                  "CUTE_DSL_CACHE_DIR": "cutlass/base_dsl/cache_helpers.py"}
    assert result["placed"] == {"FLASHINFER_WORKSPACE_BASE": workspace}
    message = cache_census.problem(result, workspace)
    assert message.startswith("kernel_cache: the installed packages declare cache locations the kernel_cache role does not place")
    assert "SGLANG_JIT_CACHE_DIR (read in sglang/srt/environ.py)" in message
    assert "SGLANG_CACHE_DIR=%s/.cache/sglang (its default)" % home in message


def test_a_new_cache_of_an_installed_package_fails_naming_it(site, workspace, placed):
    write(site / "newlib" / "jit.py", 'import os\nROOT = os.environ.get("NEWLIB_CACHE_DIR", "/tmp/newlib")\n')
    result = cache_census.census(workspace, [str(site)])
    assert result["unplaced"] == {"NEWLIB_CACHE_DIR": "newlib/jit.py"}
    message = cache_census.problem(result, workspace)
    assert "NEWLIB_CACHE_DIR (read in newlib/jit.py)" in message
    assert "kernel_cache_locations" in message and "kernel_cache_census_exempt" in message


def test_the_advice_works_place_it_or_say_why_it_is_none(site, workspace, placed, monkeypatch):
    write(site / "newlib" / "jit.py", 'import os\nROOT = os.environ.get("NEWLIB_CACHE_DIR")\n')
    extra = {"NEWLIB_CACHE_DIR": "newlib"}
    for name, value in cache_census.environment(workspace, extra).items():
        monkeypatch.setenv(name, value)
    result = cache_census.census(workspace, [str(site)], extra)
    assert result["unplaced"] == {} and result["placed"]["NEWLIB_CACHE_DIR"] == workspace + "/newlib"
    monkeypatch.delenv("NEWLIB_CACHE_DIR")
    result = cache_census.census(workspace, [str(site)], exempt={"NEWLIB_CACHE_DIR": "its dataset downloads"})
    assert result["unplaced"] == {} and result["exempt"]["NEWLIB_CACHE_DIR"] == "its dataset downloads"


def test_an_exemption_cannot_unplace_a_cache_of_the_table(site, workspace, placed, monkeypatch):
    monkeypatch.delenv("QUACK_CACHE_DIR")
    result = cache_census.census(workspace, [str(site)], exempt={"QUACK_CACHE_DIR": "I say so"})
    assert result["unplaced"] == {"QUACK_CACHE_DIR": "quack/cache/__init__.py"}


@pytest.mark.parametrize("value, origin", [("/tmp/quack", "set in the environment"), ("~/.cache/quack", "set in the environment")])
def test_a_cache_moved_out_of_the_workspace_by_an_env_file_fails(site, workspace, placed, monkeypatch, value, origin):
    monkeypatch.setenv("QUACK_CACHE_DIR", value)
    result = cache_census.census(workspace, [str(site)])
    assert result["misplaced"] == {"QUACK_CACHE_DIR": "QUACK_CACHE_DIR=%s (%s)" % (value, origin)}
    assert "QUACK_CACHE_DIR=%s" % value in cache_census.problem(result, workspace)


def test_a_link_out_of_the_workspace_is_outside(site, workspace, placed, monkeypatch, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(str(tmp_path / "elsewhere"), os.path.join(workspace, "quack"))
    result = cache_census.census(workspace, [str(site)])
    assert "QUACK_CACHE_DIR" in result["misplaced"]


def test_a_venv_without_sglang_is_scanned_all_the_same(site, workspace, placed):
    (site / "sglang" / "srt" / "environ.py").unlink()
    result = cache_census.census(workspace, [str(site)])
    assert result["sglang"] == {} and result["unplaced"] == {}
    assert "QUACK_CACHE_DIR" in result["placed"]


def test_an_sglang_registry_that_raises_is_named(site, workspace, placed):
    write(site / "sglang" / "srt" / "environ.py", "raise ImportError('broken on purpose')\n")
    with pytest.raises(cache_census.CensusError) as error:
        cache_census.census(workspace, [str(site)])
    assert "sglang/srt/environ.py: ImportError: broken on purpose" in str(error.value)


# ---- the module -----------------------------------------------------------------------------------

@pytest.fixture
def module(site, workspace, placed, monkeypatch, tmp_path, capsys):
    """kernel_cache_census's main() over the site-packages above, the venv's env file written by the table."""
    monkeypatch.setattr(verified, "package_dirs", lambda: [str(site)])
    env_file = tmp_path / "venv.env"
    env_file.write_text("".join("%s=%s\n" % item for item in cache_census.environment(workspace).items()))
    for name in cache_census.LOCATIONS:
        monkeypatch.delenv(name)

    def run(check_mode=False, **args):
        args = dict({"workspace": workspace, "env_file": [str(env_file)], "stamp": str(tmp_path / "stamps" / "census.json")}, **args)
        return module_runner.run_module(kernel_cache_census.main, capsys, args, check_mode=check_mode)
    return run


def test_the_module_passes_then_answers_from_its_stamp(module, tmp_path, site):
    first = module()
    assert first["_rc"] == 0 and first["verified"] == "checked" and first["changed"] is False
    assert first["placed"]["QUACK_CACHE_DIR"].endswith("/quack") and first["files"] == 5
    assert json.loads((tmp_path / "stamps" / "census.json").read_text())
    second = module()
    assert second["verified"] == "unchanged" and second["placed"] == first["placed"]


def test_the_module_in_check_mode_writes_no_stamp(module, tmp_path):
    assert module(check_mode=True)["_rc"] == 0
    assert not (tmp_path / "stamps").exists()


def test_the_module_fails_naming_the_new_variable(module, site):
    write(site / "newlib" / "jit.py", 'import os\nROOT = os.environ.get("NEWLIB_CACHE_DIR")\n')
    result = module()
    assert result["_rc"] == 1 and "NEWLIB_CACHE_DIR (read in newlib/jit.py)" in result["msg"]
    assert module(exempt={"NEWLIB_CACHE_DIR": "downloads"})["_rc"] == 0


def test_the_module_refuses_bad_locations_before_reading_anything(module):
    result = module(locations={"TRITON_CACHE_DIR": "x"})
    assert result["_rc"] == 1 and "TRITON_CACHE_DIR is placed by the collection" in result["msg"]


def test_the_module_names_an_env_file_it_cannot_read(module, tmp_path):
    result = module(env_file=[str(tmp_path / "missing.env")])
    assert result["_rc"] == 1 and "missing.env" in result["msg"]


# ---- a service's env may not move a cache ---------------------------------------------------------

@pytest.mark.parametrize("value, words", [
    ("/tmp/triton", ["points into /tmp", "PrivateTmp=", "every restart would compile again"]),
    ("/dev/shm/x", ["points into /dev/shm"]),
    ("/var/lib/sglang/kernel-caches/0123456789abcdef/triton", ["one cache for every venv", "switch or rollback"]),
])
def test_a_service_env_that_moves_a_cache_is_refused_saying_what_it_costs(value, words):
    problem = managed_env_problem("sglang_services_settings.default", "TRITON_CACHE_DIR", value)
    assert problem.startswith("sglang_services_settings.default: env TRITON_CACHE_DIR=%s " % value)
    for word in words:
        assert word in problem


def test_every_cache_of_the_table_is_managed_in_a_service_env():
    for name in cache_census.LOCATIONS:
        assert managed_env_problem("where", name) is not None, name
    assert "sglang_services_crash_on_jit_compile" in managed_env_problem("where", "SGLANG_CRASH_ON_JIT_COMPILE", "1")
    assert managed_env_problem("where", "MY_OWN_VARIABLE", "/tmp/x") is None


# ---- the ptxas Triton compiles with --------------------------------------------------------------

class Tool:
    """What Triton's get_ptxas returns (triton/knobs.py NvidiaTool: path, version as 'major.minor')."""

    def __init__(self, path, version):
        self.path, self.version = path, version


def stand_in_get_ptxas(tools):
    """Triton's triton.backends.nvidia.compiler.get_ptxas(arch) (ptxas-blackwell for arch >= 100,
    else ptxas), over `tools` {'blackwell': Tool, 'default': Tool}; None raises as Triton does."""
    def get_ptxas(arch):
        tool = tools["blackwell" if arch >= 100 else "default"]
        if tool is None:
            raise RuntimeError("Cannot find ptxas-blackwell")
        return tool
    return get_ptxas


def test_triton_s_ptxas_that_knows_every_target_passes():
    # Triton 3.8 bundles ptxas-blackwell 13.3 and ptxas 12.9 (read on the lab's venv)
    found = cache_census.triton_ptxas(["10.3a", "12.0f"], stand_in_get_ptxas(
        {"blackwell": Tool("/venv/triton/backends/nvidia/bin/ptxas-blackwell", "13.3"), "default": Tool("/venv/ptxas", "12.9")}))
    assert found == {"10.3a": {"path": "/venv/triton/backends/nvidia/bin/ptxas-blackwell", "version": "13.3", "problem": None},
                     "12.0f": {"path": "/venv/triton/backends/nvidia/bin/ptxas-blackwell", "version": "13.3", "problem": None}}


def test_a_bundled_ptxas_that_predates_sm103a_is_named_with_the_fix():
    found = cache_census.triton_ptxas(["10.3a"], stand_in_get_ptxas({"blackwell": Tool("/venv/bin/ptxas-blackwell", "12.8"), "default": None}))
    problem = found["10.3a"]["problem"]
    assert problem.startswith("Triton compiles for 10.3a with /venv/bin/ptxas-blackwell (CUDA 12.8), which predates it "
                              "(needs CUDA >= 12.9)")
    assert "sglang#14075" in problem and "kernel_cache_triton_ptxas: toolkit" in problem


def test_no_ptxas_at_all_is_named():
    found = cache_census.triton_ptxas(["10.3a"], stand_in_get_ptxas({"blackwell": None, "default": None}))
    assert found["10.3a"]["problem"] == "Triton finds no ptxas for 10.3a: Cannot find ptxas-blackwell"


def test_no_targets_or_no_triton_asks_nothing(monkeypatch):
    assert cache_census.triton_ptxas([], stand_in_get_ptxas({})) == {}
    monkeypatch.setitem(sys.modules, "triton", None)  # not installed: the import fails
    assert cache_census.triton_ptxas(["10.3a"]) == {}


def forget_triton():
    for name in [name for name in sys.modules if name == "triton" or name.startswith("triton.")]:
        del sys.modules[name]


def test_the_module_fails_on_triton_s_ptxas_and_reports_it(module, site, monkeypatch):
    """The module imports Triton's get_ptxas from the venv: here a stand-in package with Triton's
    module path and function, whose answer follows the environment as Triton's knobs do."""
    write(site / "triton" / "__init__.py", "")
    write(site / "triton" / "backends" / "__init__.py", "")
    write(site / "triton" / "backends" / "nvidia" / "__init__.py", "")
    write(site / "triton" / "backends" / "nvidia" / "compiler.py", (
        "import collections, os\n"
        "NvidiaTool = collections.namedtuple('NvidiaTool', 'path version')\n"
        "def get_ptxas(arch):\n"
        "    return NvidiaTool(os.environ.get('TRITON_PTXAS_BLACKWELL_PATH', '/bundled/ptxas-blackwell'),\n"
        "                      os.environ.get('STAND_IN_PTXAS_VERSION', '12.8'))\n"))
    monkeypatch.syspath_prepend(str(site))
    forget_triton()
    try:
        result = module(targets=["10.3a"])
        assert result["_rc"] == 1
        assert "kernel_cache: Triton compiles for 10.3a with /bundled/ptxas-blackwell (CUDA 12.8)" in result["msg"]
        monkeypatch.setenv("STAND_IN_PTXAS_VERSION", "13.0")
        result = module(targets=["10.3a"])
        assert result["_rc"] == 0 and result["triton_ptxas"]["10.3a"] == {"path": "/bundled/ptxas-blackwell", "version": "13.0", "problem": None}
        result = module(targets=["10.4"])
        assert result["_rc"] == 1 and "10.4" in result["msg"]
    finally:
        forget_triton()


@pytest.mark.parametrize("shape", ["3.6: get_ptxas(arch) -> NvidiaTool", "3.4: get_ptxas() -> NvidiaTool", "3.3: get_ptxas() -> (path, version)"])
def test_every_shape_of_triton_s_get_ptxas_is_read(shape):
    # Triton 3.5 bundles ptxas 12.8 for every arch: too old for sm_103a, whatever the shape.
    tool = Tool("/venv/triton/backends/nvidia/bin/ptxas", "12.8")
    get_ptxas = {"3.6": lambda arch: tool, "3.4": lambda: tool, "3.3": lambda: (tool.path, tool.version)}[shape[:3]]
    found = cache_census.triton_ptxas(["10.3a", "12.0a"], get_ptxas)
    assert found["10.3a"]["problem"].startswith("Triton compiles for 10.3a with /venv/triton/backends/nvidia/bin/ptxas (CUDA 12.8)")
    assert found["12.0a"] == {"path": tool.path, "version": "12.8", "problem": None}


def test_a_get_ptxas_that_fails_otherwise_is_named_not_a_traceback():
    def broken(arch):
        raise AttributeError("'NoneType' object has no attribute 'path'")
    assert cache_census.triton_ptxas(["10.3a"], broken)["10.3a"]["problem"] == (
        "Triton finds no ptxas for 10.3a: 'NoneType' object has no attribute 'path'")


@pytest.mark.parametrize("text, words", [
    ("class Envs:\n    pass\n", "has no Envs registry or EnvStr"),
    (STAND_IN_ENVIRON.replace('EnvStr(lambda: _default_cache_subdir("ple"))', "EnvStr(lambda: 1 / 0)"),
     "fails to resolve SGLANG_QWEN4_PLE_FILE_DIR: ZeroDivisionError"),
    (STAND_IN_ENVIRON.replace("    base = os.path.expanduser", "    raise KeyError('x')\n    base = os.path.expanduser"),
     "third_party_cache_defaults() fails: KeyError"),
])
def test_an_sglang_registry_that_cannot_be_read_is_named(site, workspace, placed, text, words):
    write(site / "sglang" / "srt" / "environ.py", text)
    with pytest.raises(cache_census.CensusError) as error:
        cache_census.census(workspace, [str(site)])
    assert words in str(error.value)


@pytest.mark.parametrize("extra, words", [
    ({"MYLIB_CACHE_DIR": ""}, "must be a relative directory"),
    ({"MYLIB_CACHE_DIR": "."}, "must be a relative directory"),
    ({"MYLIB_CACHE_DIR": "my lib"}, "must be a relative directory"),
    ({"MYLIB_CACHE_DIR": "triton"}, "MYLIB_CACHE_DIR: triton is TRITON_CACHE_DIR's directory already"),
    ({"A_CACHE_DIR": "shared", "B_CACHE_DIR": "shared"}, "B_CACHE_DIR: shared is A_CACHE_DIR's directory already"),
])
def test_each_added_cache_gets_a_directory_of_its_own(workspace, extra, words):
    with pytest.raises(cache_census.CensusError) as error:
        cache_census.environment(workspace, extra)
    assert words in str(error.value)
    assert cache_census.environment(workspace, {"TRITON_CACHE_DIR": "triton"})["TRITON_CACHE_DIR"] == workspace + "/triton"


@pytest.mark.parametrize("key", ["SGLANG_CUTE_AOT_CACHE_DIR", "MYLIB_CACHE_DIR", "SOME_WORKSPACE_DIR"])
def test_a_service_env_may_not_move_any_cache_named_variable(key):
    problem = managed_env_problem("sglang_services_settings.default", key, "/tmp/x")
    assert problem.startswith("sglang_services_settings.default: env %s=/tmp/x points into /tmp" % key)
    assert "kernel_cache_locations" in managed_env_problem("where", "MYLIB_CACHE_DIR")

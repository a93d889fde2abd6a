"""The input checks every role's preflight shares (module_utils/preflight.py): paths, dedicated
directories, env files, role-managed environment variables, booleans as operators pass them."""

import pytest

from ansible_collections.blackwell.sglang.plugins.filter import preflight as filters
from ansible_collections.blackwell.sglang.plugins.module_utils import preflight

GOOD_PATHS = ["/opt/cuda", "/opt/cuda/13.0.2", "/var/lib/sglang", "/etc/sglang/flashinfer.env", "/usr/bin/python3",
              "/srv/models/Kimi-K2.5+eagle3@v2", "/"]


@pytest.mark.parametrize("value", GOOD_PATHS)
def test_absolute_normalised_paths_pass(value):
    assert preflight.path_problem("v", value) is None


@pytest.mark.parametrize("value,message", [
    (":/opt/cuda", "cuda_toolkit_pip_prefix must be an absolute path (start with /), got ':/opt/cuda'"),
    ("opt/cuda", "cuda_toolkit_pip_prefix must be an absolute path (start with /), got 'opt/cuda'"),
    ("", "cuda_toolkit_pip_prefix must be an absolute path, got ''"),
    (None, "cuda_toolkit_pip_prefix must be an absolute path, got None"),
    (["/opt"], "cuda_toolkit_pip_prefix must be an absolute path, got ['/opt']"),
    ("/opt/cuda/", "cuda_toolkit_pip_prefix must not end with / (got '/opt/cuda/'); write '/opt/cuda'"),
    ("/srv/X//", "cuda_toolkit_pip_prefix must not end with / (got '/srv/X//'); write '/srv/X'"),
    ("//opt/cuda", "cuda_toolkit_pip_prefix has an empty component (//) in '//opt/cuda'"),
    ("/opt//cuda", "cuda_toolkit_pip_prefix has an empty component (//) in '/opt//cuda'"),
    ("/opt/../cuda", "cuda_toolkit_pip_prefix must be normalised, without . or .. components, got '/opt/../cuda'"),
    ("/opt/./cuda", "cuda_toolkit_pip_prefix must be normalised, without . or .. components, got '/opt/./cuda'"),
    ("/opt/cuda\n", "cuda_toolkit_pip_prefix holds '\\n' in '/opt/cuda\\n'; a path here may hold only letters, digits "
                    "and . _ + @ - / (':' splits PATH, spaces and newlines break env files)"),
    ("/opt/cuda:/usr", "cuda_toolkit_pip_prefix holds ':' in '/opt/cuda:/usr'"),
    ("/opt/my cuda", "cuda_toolkit_pip_prefix holds ' ' in '/opt/my cuda'"),
    ("/opt/cu$da%i", "cuda_toolkit_pip_prefix holds '$', '%' in '/opt/cu$da%i'"),
])
def test_bad_paths_name_the_variable_and_the_fault(value, message):
    assert preflight.path_problem("cuda_toolkit_pip_prefix", value).startswith(message)


@pytest.mark.parametrize("value", ["/", "/etc", "/etc/default", "/etc/systemd/system", "/usr", "/usr/local/lib", "/var",
                                   "/var/lib", "/opt", "/home", "/root", "/srv", "/var/log"])
def test_system_directories_are_refused_as_dedicated(value):
    problem = preflight.dedicated_dir_problem("sglang_services_env_dir", value)
    assert problem == ("sglang_services_env_dir is %s, a directory the system shares; the roles keep their files out of it. "
                       "Use a directory of its own, e.g. %s/sglang" % (value, value.rstrip("/")))


@pytest.mark.parametrize("value,tree", [("/tmp/sglang", "/tmp/"), ("/run/sglang", "/run/"), ("/proc/x", "/proc/"),
                                        ("/var/tmp/cache", "/var/tmp/"), ("/dev/shm/x", "/dev/")])
def test_pseudo_and_scratch_trees_are_refused_as_dedicated(value, tree):
    assert preflight.dedicated_dir_problem("v", value) == (
        "v is %s, under %s (not kept on disk, or cleared); use a directory of its own" % (value, tree))


@pytest.mark.parametrize("value", ["/etc/sglang", "/opt/sglang", "/var/lib/sglang", "/usr/local/lib/blackwell-sglang",
                                   "/home/sglang", "/data", "/srv/sglang/venvs"])
def test_dedicated_directories_pass(value):
    assert preflight.dedicated_dir_problem("v", value) is None


@pytest.mark.parametrize("value,drop_in", [("/etc/sudoers.d", "/etc/sudoers.d"), ("/etc/pam.d", "/etc/pam.d"),
                                           ("/etc/systemd/system/x.service.d", "/etc/systemd/system/x.service.d"),
                                           ("/etc/cron.d/sglang", "/etc/cron.d")])
def test_drop_in_directories_are_refused_as_dedicated_and_for_env_files(value, drop_in):
    assert preflight.dedicated_dir_problem("v", value) == (
        "v is %s, in %s, a drop-in directory whose every file another program reads; the roles keep their files out of "
        "it. Use a directory of its own, e.g. /etc/sglang" % (value, drop_in))
    assert preflight.env_file_problem("f", value + "/x.env") == (
        "f is %s/x.env, a file in %s, a drop-in directory whose every file another program reads; the roles keep their "
        "files out of it: put the file in a directory of its own, e.g. /etc/sglang/x.env" % (value, drop_in))


@pytest.mark.parametrize("value", ["/etc/sglang.d.conf/x", "/srv/conf.d", "/etc/sglang", "/etc.d/x", "/etc/sglang/env.d"])
def test_only_drop_in_directories_under_etc_are_refused(value):
    assert preflight.dedicated_dir_problem("v", value) is None


def test_dedicated_check_checks_the_path_first():
    assert preflight.dedicated_dir_problem("v", "/etc/") == "v must not end with / (got '/etc/'); write '/etc'"


@pytest.mark.parametrize("value,directory", [("/etc/default/flashinfer", "/etc/default"), ("/etc/flashinfer.env", "/etc"),
                                             ("/flashinfer.env", "/"), ("/tmp/flashinfer.env", "/tmp")])
def test_env_files_in_shared_directories_are_refused(value, directory):
    name = value.rsplit("/", 1)[1]
    assert preflight.env_file_problem("flashinfer_env_file", value) == (
        "flashinfer_env_file is %s, a file in %s, a directory the system shares; the roles keep their files out of it: "
        "put the file in a directory of its own, e.g. /etc/sglang/%s" % (value, directory, name))


def test_env_files_in_own_directories_pass_and_bad_paths_fail_as_paths():
    assert preflight.env_file_problem("f", "/etc/sglang/flashinfer.env") is None
    assert preflight.env_file_problem("f", "/etc/flashinfer/flashinfer.env") is None
    assert preflight.env_file_problem("f", "etc/sglang/x.env") == "f must be an absolute path (start with /), got 'etc/sglang/x.env'"


KERNELS = "set sglang_node_kernel_cache_dir (each venv's kernel caches live in <dir>/<venv id>) instead"


@pytest.mark.parametrize("key,advice", [
    ("CUDA_HOME", "set cuda_toolkit_version / cuda_toolkit_pip_prefix (flashinfer_cuda_home) instead"),
    ("PATH", "remove it: the flashinfer role writes PATH with CUDA_HOME/bin first (flashinfer_cuda_home)"),
    ("FLASHINFER_CUDA_ARCH_LIST", "set sglang_node_gpu_archs (or flashinfer_cuda_archs) instead"),
    ("FLASHINFER_JIT_VERBOSE", "set the flashinfer role's variables (flashinfer_*) instead"),
    ("CUDA_VISIBLE_DEVICES", "set the service's cuda_visible_devices instead"),
    ("TORCHINDUCTOR_CACHE_DIR", KERNELS),
    ("TRITON_CACHE_DIR", KERNELS),
    ("SGLANG_DG_CACHE_DIR", KERNELS),
    ("DG_JIT_CACHE_DIR", KERNELS),
    ("TRTLLM_DG_CACHE_DIR", KERNELS),
    ("HOME", "set sglang_node_home instead"),
])
def test_role_managed_environment_is_refused_with_what_to_do(key, advice):
    assert preflight.managed_env_problem("sglang_services_eagle3", key) == (
        "sglang_services_eagle3: env %s is managed by the roles; %s" % (key, advice))


@pytest.mark.parametrize("key", ["HF_TOKEN", "NCCL_DEBUG", "SGLANG_LOG_LEVEL", "CUDA_LAUNCH_BLOCKING", "PATHS", "MY_FLASHINFER_X"])
def test_the_services_own_environment_passes(key):
    assert preflight.managed_env_problem("s", key) is None


@pytest.mark.parametrize("value,expected", [
    (True, True), (False, False), ("true", True), ("false", False), ("True", True), ("FALSE", False), ("yes", True),
    ("no", False), ("on", True), ("off", False), ("1", True), ("0", False), (1, True), (0, False),
])
def test_booleans_as_operators_pass_them(value, expected):
    assert preflight.as_bool(value) is expected
    assert preflight.bool_problem("sglang_venv_rollback", value) is None


@pytest.mark.parametrize("value", ["maybe", "", None, 2, "ture", [], "true\n "[:5] + "x"])
def test_non_booleans_are_refused_naming_the_variable(value):
    with pytest.raises(ValueError):
        preflight.as_bool(value)
    assert preflight.bool_problem("sglang_venv_rollback", value) == (
        "sglang_venv_rollback: %r is not a boolean (use true or false)" % (value,))


def test_filters_report_every_bad_variable_at_once():
    mapping = {"a": "/opt/x", "b": ":/opt", "c": "/etc"}
    assert filters.path_problems(mapping) == ["b must be an absolute path (start with /), got ':/opt'"]
    assert [p.split(" ")[0] for p in filters.path_problems(mapping, dedicated=True)] == ["b", "c"]
    assert filters.env_file_problems({"f": "/etc/sglang/f.env", "g": "/etc/default/g"})[0].startswith("g is /etc/default/g")
    assert filters.bool_problems({"x": "true", "y": "nope", "z": False}) == ["y: 'nope' is not a boolean (use true or false)"]
    assert set(filters.FilterModule().filters()) == {"path_problems", "env_file_problems", "bool_problems", "sglang_node_problems",
                                                     "sglang_venv_problems"}

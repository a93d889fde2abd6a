"""The arch table: which toolkit builds which Blackwell target, and the messages for bad input."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import cuda_arch


@pytest.mark.parametrize(
    "arch,expected",
    [
        ("12.0", "12.8"),   # RTX PRO 6000
        ("12.0a", "12.8"),
        ("12.0f", "12.9"),  # family targets need 12.9
        ("10.3", "12.9"),   # B300
        ("10.3a", "12.9"),
        ("12.1a", "12.9"),  # GB10
        ("10.0", "12.8"),
        ("9.0", "11.8"),
        ("9.0a", "12.0"),   # Hopper's arch-specific target (wgmma) came with CUDA 12.0
        ("8.8", "13.0"),
    ],
)
def test_min_toolkit(arch, expected):
    assert cuda_arch.min_toolkit(arch) == expected


@pytest.mark.parametrize(
    "arch,name",
    [("12.0", "compute_120"), ("10.3", "compute_103"), ("12.0f", "compute_120"), ("9.0", "compute_90")],
)
def test_compute_name(arch, name):
    assert cuda_arch.compute_name(arch) == name


@pytest.mark.parametrize("arch", ["sm120", "12", "12.0x", "120", "", "12.00", "compute_120"])
def test_malformed_arch_is_rejected(arch):
    with pytest.raises(cuda_arch.ArchError, match="not of the form M.m"):
        cuda_arch.parse_arch(arch)


def test_unknown_arch_names_the_known_ones():
    with pytest.raises(cuda_arch.ArchError, match=r"unknown compute capability '13.0'.*12.0, 12.1"):
        cuda_arch.parse_arch("13.0")


@pytest.mark.parametrize(
    "version,archs,problems",
    [
        ("13.0.2", ["12.0", "10.3"], []),
        ("12.8.1", ["12.0"], []),
        ("12.9.1", ["10.3", "12.1"], []),
        ("12.8.1", ["10.3"], ["target 10.3 needs CUDA toolkit >= 12.9, but 12.8.1 was requested"]),
        ("12.6.3", ["12.0", "9.0"], ["target 12.0 needs CUDA toolkit >= 12.8, but 12.6.3 was requested"]),
        ("13.0.2", ["10.1"], ["target 10.1 is not built by CUDA toolkit >= 13.0 (requested 13.0.2)"]),
        ("13.0", ["12.0"], ["CUDA toolkit version '13.0' is not a full X.Y.Z version (e.g. 13.0.2)"]),
        ("13.0.2", "12.0", ["target archs must be a list such as ['12.0'], got '12.0'"]),
    ],
)
def test_toolkit_problems(version, archs, problems):
    assert cuda_arch.toolkit_problems(archs, version) == problems


def test_every_problem_is_reported_at_once():
    problems = cuda_arch.toolkit_problems(["10.3", "sm100", "12.1"], "12.8.1")
    assert len(problems) == 3
    assert "10.3 needs CUDA toolkit >= 12.9" in problems[0]
    assert problems[1].startswith("target archs: target arch 'sm100' is not of the form M.m")
    named = cuda_arch.toolkit_problems(["12"], "13.0.2", "cuda_toolkit_target_archs")
    assert named == ["cuda_toolkit_target_archs: target arch '12' is not of the form M.m (e.g. '12.0' for RTX PRO 6000, "
                     "'10.3' for B300)"]
    assert cuda_arch.toolkit_problems("12.0", "13.0.2", "x") == ["x must be a list such as ['12.0'], got '12.0'"]
    assert "12.1 needs CUDA toolkit >= 12.9" in problems[2]


def test_versions_compare_numerically_not_as_strings():
    # 12.10 > 12.9 numerically, though not as strings.
    assert cuda_arch.toolkit_problems(["10.3"], "12.10.0") == []


@pytest.mark.parametrize("arch", ["sm120", "12", "12.0x", " "])
def test_malformed_arch_message(arch):
    with pytest.raises(cuda_arch.ArchError) as info:
        cuda_arch.parse_arch(arch)
    assert str(info.value) == (
        "target arch %r is not of the form M.m (e.g. '12.0' for RTX PRO 6000, '10.3' for B300)" % (arch,))


def test_unknown_arch_lists_the_known_ones_in_numeric_order():
    with pytest.raises(cuda_arch.ArchError) as info:
        cuda_arch.parse_arch("13.7")
    assert str(info.value) == (
        "unknown compute capability '13.7'; known: 7.5, 8.0, 8.6, 8.7, 8.8, 8.9, 9.0, 10.0, 10.1, 10.3, 11.0, 12.0, 12.1")


@pytest.mark.parametrize("version,archs,problems", [
    ("12.9.0", ["10.3"], []),  # exactly the first toolkit that builds it
    ("12.8.0", ["12.0"], []),
    ("13.0.0", ["10.1"], ["target 10.1 is not built by CUDA toolkit >= 13.0 (requested 13.0.0)"]),  # exactly the first that does not
    ("12.9.1", ["10.1"], []),
])
def test_toolkit_problems_at_the_boundaries(version, archs, problems):
    assert cuda_arch.toolkit_problems(archs, version) == problems


@pytest.mark.parametrize(
    "arch,toolkit,gap",
    [
        ("12.0", "12.8", (None, None)),
        ("12.0f", "12.8", ("12.9", None)),     # family targets need 12.9
        ("12.0f", "12.9.1", (None, None)),
        ("10.3a", "12.8.1", ("12.9", None)),   # B300
        ("10.3a", "13.0", (None, None)),
        ("10.1", "12.9", (None, None)),
        ("10.1", "13.0", (None, "13.0")),      # renamed 11.0 in CUDA 13.0
        ("10.1", "13.0.2", (None, "13.0")),
        ("9.0a", "11.8", ("12.0", None)),
    ],
)
def test_toolkit_gap(arch, toolkit, gap):
    assert cuda_arch.toolkit_gap(arch, toolkit) == gap


def test_toolkit_gap_rejects_what_is_not_an_arch():
    with pytest.raises(cuda_arch.ArchError, match="not of the form M.m"):
        cuda_arch.toolkit_gap("sm120", "13.0")


@pytest.mark.parametrize(
    "text,release",
    [
        ("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n", "13.0"),
        ("Cuda compilation tools, release 12.8, V12.8.93", "12.8"),
        ("release 12.10, V12.10.1", "12.10"),
        ("release 13.0 V13.0.88", None),  # not nvcc's format: no comma after the release
        ("", None),
        (None, None),
    ],
)
def test_nvcc_release(text, release):
    assert cuda_arch.nvcc_release(text) == release


@pytest.mark.parametrize("ccs,ordered", [
    (["12.0", "9.0", "10.3", "8.9", "12.1"], ["8.9", "9.0", "10.3", "12.0", "12.1"]),
    (["10.0", "9.0"], ["9.0", "10.0"]),  # numeric, not text order
])
def test_arch_key_orders_as_numbers(ccs, ordered):
    assert sorted(ccs, key=cuda_arch.arch_key) == ordered
    assert cuda_arch.arch_key("12.0") == (12, 0)


def test_target_key_orders_targets_known_or_not():
    targets = ["12.0f", "9.0a", "10.3a", "8.0", "12.0a", "7.0"]
    assert sorted(targets, key=cuda_arch.target_key) == ["7.0", "8.0", "9.0a", "10.3a", "12.0a", "12.0f"]
    assert cuda_arch.target_key("12.0f") == ((12, 0), "f")
    with pytest.raises(cuda_arch.ArchError, match="is not of the form M.m"):
        cuda_arch.target_key("sm120")


@pytest.mark.parametrize("gpus,archs,missing", [
    (["12.1"], ["12.0"], "12.1"),              # GB10-like GPU, PRO 6000 inventory
    (["12.0", "10.3"], ["12.0f"], "10.3"),     # a suffixed target covers its base only
    (["10.3", "12.1", "9.0"], ["sm120"], "9.0, 10.3, 12.1"),  # a malformed target covers nothing, sorted as numbers
    (["12.1"], ["12.0", "10.3"], "12.1"),
])
def test_gpu_coverage_names_the_uncovered_gpus(gpus, archs, missing):
    assert cuda_arch.gpu_coverage_problems(gpus, archs, "cuda_toolkit_target_archs") == [
        "cuda_toolkit_target_archs [%s] does not cover the GPUs found on this host (compute capability %s); set "
        "sglang_node_gpu_archs (or cuda_toolkit_target_archs) for this host's group to the GPUs' compute capabilities"
        % (", ".join(archs), missing)]


def test_gpu_coverage_without_a_target_list_names_every_gpu():
    assert cuda_arch.gpu_coverage_problems(["12.0"], None, "x")[0].startswith(
        "x [] does not cover the GPUs found on this host (compute capability 12.0)")


@pytest.mark.parametrize("gpus,archs", [([], ["12.0"]), (None, []), (["12.0"], ["12.0", "10.3"]), (["10.3"], ["10.3a"]),
                                        (["12.0"], ["sm120", "12.0"])])  # a malformed entry does not hide the next
def test_gpu_coverage_passes_when_every_gpu_is_a_target(gpus, archs):
    assert cuda_arch.gpu_coverage_problems(gpus, archs, "x") == []


@pytest.mark.parametrize("version", ["13.0.2\n", " 13.0.2", "13.0", "13.0.2.1"])
def test_toolkit_version_is_not_stripped_it_names_a_directory(version):
    assert cuda_arch.toolkit_problems(["12.0"], version) == [
        "CUDA toolkit version %r is not a full X.Y.Z version (e.g. 13.0.2)" % (version,)]

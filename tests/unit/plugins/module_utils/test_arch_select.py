"""FlashInfer target selection and spelling: the cases of the FlashInfer arch issue."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import arch_select
from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import ArchError


# ---- select_archs: GPUs decide, inventory only where there are none, disagreement is an error ----

@pytest.mark.parametrize(
    "gpu_ccs,inventory,expected",
    [
        (["12.0"] * 8, None, ["12.0"]),                 # RTX PRO 6000 host, no inventory: GPUs
        (["10.3"] * 8, [], ["10.3"]),                   # B300 host, empty inventory: GPUs
        ([], ["12.0"], ["12.0"]),                       # no GPUs (image build): inventory
        (None, ["10.3", "12.0", "12.0"], ["10.3", "12.0"]),  # dedup, sorted
        (["12.0"] * 8, ["12.0"], ["12.0"]),             # both, agreeing
        (["12.0", "9.0"], ["9.0", "12.0"], ["9.0", "12.0"]),  # mixed host, order-independent
        (["12.0"], ["12.0a"], ["12.0a"]),               # explicit suffix kept for render_archs
        ([], [" 10.3a "], ["10.3a"]),
        (["10.3", "9.0", "10.3", "12.0"], None, ["9.0", "10.3", "12.0"]),  # numeric, not string, order
    ],
)
def test_select_archs(gpu_ccs, inventory, expected):
    assert arch_select.select_archs(gpu_ccs, inventory) == expected


HINT = "fix the inventory or leave flashinfer_cuda_archs unset to use the GPUs"
KNOWN = "7.5, 8.0, 8.6, 8.7, 8.8, 8.9, 9.0, 10.0, 10.1, 10.3, 11.0, 12.0, 12.1"
FORM = "is not of the form M.m (e.g. '12.0' for RTX PRO 6000, '10.3' for B300)"


def raised(func, *args):
    with pytest.raises(ArchError) as info:
        func(*args)
    return str(info.value)


def test_inventory_disagreeing_with_gpus_is_an_error():
    assert raised(arch_select.select_archs, ["10.3"] * 8, ["12.0"]) == (
        "flashinfer_cuda_archs 12.0 does not match the GPUs found on this host (compute capability 10.3); " + HINT)


def test_inventory_missing_one_of_the_gpus_is_an_error():
    assert raised(arch_select.select_archs, ["12.0", "9.0"], ["12.0"]) == (
        "flashinfer_cuda_archs 12.0 does not match the GPUs found on this host (compute capability 9.0, 12.0); " + HINT)
    assert raised(arch_select.select_archs, ["12.0"], ["9.0", "12.0"]) == (
        "flashinfer_cuda_archs 9.0, 12.0 does not match the GPUs found on this host (compute capability 12.0); " + HINT)


def test_inventory_suffix_does_not_hide_a_disagreement():
    assert raised(arch_select.select_archs, ["12.0"], ["10.3a"]) == (
        "flashinfer_cuda_archs 10.3 does not match the GPUs found on this host (compute capability 12.0); " + HINT)


@pytest.mark.parametrize("gpu_ccs,inventory", [(None, None), ([], []), ([], None)])
def test_neither_gpus_nor_inventory_is_an_error(gpu_ccs, inventory):
    assert raised(arch_select.select_archs, gpu_ccs, inventory) == (
        "no FlashInfer target arch: no NVIDIA GPU was found on this host and flashinfer_cuda_archs is not set "
        "(set it, e.g. ['12.0'] for RTX PRO 6000 or ['10.3'] for B300)")


@pytest.mark.parametrize(
    "gpu_ccs,inventory,message",
    [
        ([], ["12.0a", "12.0f"], "flashinfer_cuda_archs names 12.0 twice, as 12.0a and 12.0f; keep one"),
        ([], "12.0", "flashinfer_cuda_archs must be a list such as ['12.0'], got '12.0'"),
        ("12.0", None, "GPU compute capabilities must be a list such as ['12.0'], got '12.0'"),
        ([], ["sm120"], "target arch 'sm120' " + FORM),
        (["13.7"], None, "unknown compute capability '13.7'; known: " + KNOWN),
        (["12.0a"], None, "GPU compute capability '12.0a' must be a bare M.m such as '12.0'"),
    ],
)
def test_select_archs_rejects_bad_input(gpu_ccs, inventory, message):
    assert raised(arch_select.select_archs, gpu_ccs, inventory) == message


# ---- render_archs + cache_arch_dir: the cases ----

@pytest.mark.parametrize(
    "case,archs,cuda,flashinfer,rendered,cache_dir",
    [
        ("A: nvcc 12.8 cannot build family targets", ["12.0"], "12.8", "0.6.8", ["12.0a"], "120a"),
        ("A: full nvcc version", ["12.0"], "12.8.93", "0.6.8", ["12.0a"], "120a"),
        ("C: CUDA 13.0, FlashInfer 0.7.2", ["12.0"], "13.0", "0.7.2", ["12.0f"], "120f"),
        ("first FlashInfer with 12.0f", ["12.0"], "12.9", "0.6.7", ["12.0f"], "120f"),
        ("FlashInfer just before 12.0f", ["12.0"], "13.0", "0.6.6", ["12.0a"], "120a"),
        ("D: B300 on CUDA 13.0", ["10.3"], "13.0", "0.7.2", ["10.3a"], "103a"),
        ("D: B300 on CUDA 12.9", ["10.3"], "12.9.1", "0.6.8", ["10.3a"], "103a"),
        ("E: FlashInfer 0.4.0, CUDA 12.8", ["12.0"], "12.8", "0.4.0", ["12.0a"], "120a"),
        ("E: FlashInfer 0.4.0, CUDA 13.0", ["12.0"], "13.0", "0.4.0", ["12.0a"], "120a"),
        ("GB10", ["12.1"], "13.0", "0.7.2", ["12.1a"], "121a"),
        ("Hopper", ["9.0"], "12.8", "0.6.8", ["9.0a"], "90a"),
        ("Ampere stays plain", ["8.0"], "12.8", "0.6.8", ["8.0"], "80"),
        ("explicit 12.0a kept on CUDA 13.0", ["12.0a"], "13.0", "0.7.2", ["12.0a"], "120a"),
        ("explicit 12.0f kept on old FlashInfer", ["12.0f"], "12.9", "0.4.0", ["12.0f"], "120f"),
        ("explicit 10.3a", ["10.3a"], "12.9", "0.6.8", ["10.3a"], "103a"),
        ("several, sorted", ["12.0", "10.3"], "13.0", "0.7.2", ["10.3a", "12.0f"], "103a_120f"),
        ("duplicates collapse", ["12.0", "12.0a"], "12.8", "0.6.8", ["12.0a"], "120a"),
        ("versions compare as numbers", ["12.0"], "12.10", "0.10.0", ["12.0f"], "120f"),
        ("local version of a wheel", ["12.0"], "12.9", "0.6.7+cu129", ["12.0f"], "120f"),
    ],
)
def test_render_archs_and_cache_dir(case, archs, cuda, flashinfer, rendered, cache_dir):
    assert arch_select.render_archs(archs, cuda, flashinfer) == rendered, case
    assert arch_select.cache_arch_dir(rendered) == cache_dir, case


def test_flashinfer_040_never_gets_a_plain_sm120_target():
    # FlashInfer 0.4.0 given a bare "12.0" builds compute_120 without the Blackwell-only instructions.
    for cuda in ("12.8", "12.9", "13.0"):
        assert arch_select.render_archs(["12.0"], cuda, "0.4.0") == ["12.0a"]


@pytest.mark.parametrize(
    "archs,cuda,message",
    [
        (["10.3a"], "12.8", r"^10\.3a needs CUDA >= 12\.9; nvcc is 12\.8$"),  # F
        (["10.3"], "12.8", r"^10\.3a needs CUDA >= 12\.9; nvcc is 12\.8$"),
        (["12.0f"], "12.8", r"^12\.0f needs CUDA >= 12\.9; nvcc is 12\.8$"),
        (["12.1"], "12.8.1", r"^12\.1a needs CUDA >= 12\.9; nvcc is 12\.8\.1$"),
        (["12.0"], "12.6", r"^12\.0a needs CUDA >= 12\.8; nvcc is 12\.6$"),
        (["10.1"], "13.0", r"^10\.1a is not built by CUDA >= 13\.0; nvcc is 13\.0$"),
    ],
)
def test_too_old_or_too_new_toolkit_names_both_versions(archs, cuda, message):
    with pytest.raises(ArchError, match=message):
        arch_select.render_archs(archs, cuda, "0.6.8")


def test_every_unbuildable_target_is_reported_at_once():
    with pytest.raises(ArchError) as info:
        arch_select.render_archs(["10.3", "12.1", "12.0"], "12.8", "0.6.8")
    assert str(info.value).splitlines() == [
        "10.3a needs CUDA >= 12.9; nvcc is 12.8",
        "12.1a needs CUDA >= 12.9; nvcc is 12.8",
    ]


@pytest.mark.parametrize(
    "archs,cuda,flashinfer,message",
    [
        ([], "13.0", "0.7.2", "no target arch to render"),
        ("12.0", "13.0", "0.7.2", "target archs must be a list such as ['12.0'], got '12.0'"),
        (["12.0"], "", "0.7.2", "CUDA version is empty"),
        (["12.0"], "thirteen", "0.7.2", "CUDA version 'thirteen' is not a version number"),
        (["12.0"], "13.0", None, "FlashInfer version is empty"),
        (["12.0"], "13.0", "latest", "FlashInfer version 'latest' is not a version number"),
        (["sm_120"], "13.0", "0.7.2", "target arch 'sm_120' " + FORM),
    ],
)
def test_render_archs_rejects_bad_input(archs, cuda, flashinfer, message):
    assert raised(arch_select.render_archs, archs, cuda, flashinfer) == message


def test_render_archs_sorts_by_number_not_by_text():
    assert arch_select.render_archs(["12.0", "9.0", "10.3"], "13.0", "0.7.2") == ["9.0a", "10.3a", "12.0f"]


@pytest.mark.parametrize(
    "rendered,expected",
    [
        (["12.0f"], "120f"),
        (["10.3a"], "103a"),
        (["12.0a"], "120a"),
        # FlashInfer sorts (major, minor+suffix): 9 before 10 before 12, whatever the input order.
        (["12.0f", "9.0a", "10.3a"], "90a_103a_120f"),
        (["8.0", "9.0a"], "80_90a"),
        (["12.0f", "12.0f"], "120f"),
    ],
)
def test_cache_arch_dir(rendered, expected):
    assert arch_select.cache_arch_dir(rendered) == expected


@pytest.mark.parametrize("rendered,message", [
    ([], "no rendered target arch to name a cache directory for"),
    (None, "no rendered target arch to name a cache directory for"),
    ("12.0f", "rendered archs must be a list such as ['12.0'], got '12.0f'"),
    (["120f"], "target arch '120f' " + FORM),
])
def test_cache_arch_dir_rejects_bad_input(rendered, message):
    assert raised(arch_select.cache_arch_dir, rendered) == message


def test_select_then_render_end_to_end():
    archs = arch_select.select_archs(["12.0"] * 8, ["12.0"])
    rendered = arch_select.render_archs(archs, "13.0.88", "0.7.2")
    assert " ".join(rendered) == "12.0f"
    assert arch_select.cache_arch_dir(rendered) == "120f"


def test_fallback_version_class_gives_the_same_answers(monkeypatch):
    # A target interpreter without `packaging` uses ansible's LooseVersion (imported once, in cuda_arch).
    from ansible.module_utils.compat.version import LooseVersion
    from ansible_collections.blackwell.sglang.plugins.module_utils import cuda_arch

    monkeypatch.setattr(cuda_arch, "Version", LooseVersion)
    monkeypatch.setattr(arch_select, "Version", LooseVersion)
    assert arch_select.render_archs(["12.0"], "12.8", "0.6.8") == ["12.0a"]
    assert arch_select.render_archs(["12.0"], "13.0", "0.7.2") == ["12.0f"]
    assert arch_select.render_archs(["12.0"], "12.10", "0.10.0") == ["12.0f"]
    assert arch_select.render_archs(["12.0"], "13.0", "0.4.0") == ["12.0a"]

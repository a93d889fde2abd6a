"""pip_index_args (the sglang_venv role's index arguments) and the sglang_services lookup (the one
list of services the role, its filters and its unit template share)."""

import pytest

from ansible.errors import AnsibleFilterError, AnsibleLookupError
from ansible_collections.blackwell.sglang.plugins.filter import pip, sglang_services
from ansible_collections.blackwell.sglang.plugins.lookup.sglang_services import LookupModule


@pytest.mark.parametrize("index_url,extra,args", [
    ("", [], []),
    ("", None, []),
    ("https://mirror/simple", [], ["--index-url", "https://mirror/simple"]),
    ("", ["https://a/simple"], ["--extra-index-url", "https://a/simple"]),
    ("https://m/simple", ["https://a/simple", "file:///w"],
     ["--index-url", "https://m/simple", "--extra-index-url", "https://a/simple", "--extra-index-url", "file:///w"]),
])
def test_pip_index_args(index_url, extra, args):
    assert pip.pip_index_args(index_url, extra) == args


@pytest.mark.parametrize("index_url,extra", [(None, []), ("https://m", "https://a")])
def test_pip_index_args_rejects_other_types(index_url, extra):
    with pytest.raises(AnsibleFilterError) as info:
        pip.pip_index_args(index_url, extra)
    assert str(info.value) == ("pip_index_args wants an index URL string and a list of extra URLs, got %r and %r"
                               % (index_url, extra))


def test_pip_filter_name():
    assert pip.FilterModule().filters() == {"pip_index_args": pip.pip_index_args}


def test_lookup_lists_the_services_the_filters_know():
    services = LookupModule().run([])
    assert services == [
        {"name": "eagle3", "unit": "sglang-eagle3.service", "label": "EAGLE-3 speculative decoding"},
        {"name": "autoregressive", "unit": "sglang-autoregressive.service", "label": "autoregressive"},
        {"name": "dflash", "unit": "sglang-dflash.service", "label": "DFlash speculative decoding"},
    ]
    assert [s["name"] for s in services] == list(sglang_services.sglang_services_argvs({}))
    assert sorted(sglang_services.sglang_services_conflicts({})) == sorted(s["name"] for s in services)


def test_lookup_takes_no_terms():
    with pytest.raises(AnsibleLookupError, match="takes no terms"):
        LookupModule().run(["eagle3"])


def test_lookup_takes_no_terms():
    with pytest.raises(AnsibleLookupError) as error:
        LookupModule().run(["eagle3"])
    assert str(error.value) == "blackwell.sglang.sglang_services takes no terms, got ['eagle3']"

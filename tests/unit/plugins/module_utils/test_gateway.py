"""Worker identity at the SGLang model gateway (plugins/module_utils/gateway.py) and the rollout
filters that use it.

The worker lists below have the shape smg 1.13.0 (PyPI) answered GET /workers with, trimmed to the
fields the drain reads; the three spellings of one worker and the url@rank entries of a --dp-aware
gateway are what it held after the POST /workers calls described in the module's docstring.
"""

import socket

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.filter import rollout as f
from ansible_collections.blackwell.sglang.plugins.module_utils import gateway as g

# GET /workers of a gateway that took http://127.0.0.1:39101 three ways, and a --dp-aware gateway's
# entries for a worker whose /get_server_info reports dp_size 2.
THREE_SPELLINGS = [
    {"id": "01a242ce-b9ca", "url": "http://127.0.0.1:39101/", "is_healthy": True},
    {"id": "01a242ce-b9f4", "url": "http://localhost:39101", "is_healthy": True},
    {"id": "01a242ce-959c", "url": "http://127.0.0.1:39101", "is_healthy": True},
    {"id": "01a242ce-fe6b", "url": "http://127.0.0.1:39102", "is_healthy": True},
]
DP_AWARE = [
    {"id": "01a242d0-defb", "url": "http://127.0.0.1:39103@1", "dp_base_url": "http://127.0.0.1:39103", "dp_rank": 1},
    {"id": "01a242d0-7093", "url": "http://127.0.0.1:39103@0", "dp_base_url": "http://127.0.0.1:39103", "dp_rank": 0},
    {"id": "01a242d0-6cc8", "url": "http://127.0.0.1:39102"},
]


def ids(entries):
    return sorted(entry["id"] for entry in entries)


def table(names):
    """A resolver standing in for DNS (socket.getaddrinfo's signature and answer shape)."""
    def resolve(host, port, proto=0):
        if host not in names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, proto, "", (a, port))
                for a in names[host]]
    return resolve


@pytest.mark.parametrize("url, identity", [
    ("http://127.0.0.1:39101", ("http", "127.0.0.1", 39101)),
    ("http://127.0.0.1:39101/", ("http", "127.0.0.1", 39101)),
    ("HTTP://Node-1.Example.COM.:30000", ("http", "node-1.example.com", 30000)),
    ("http://node-1", ("http", "node-1", 80)),
    ("https://node-1", ("https", "node-1", 443)),
    ("http://[0:0:0:0:0:0:0:1]:30000", ("http", "::1", 30000)),
    ("http://[::FFFF:10.0.0.1]:30000", ("http", "10.0.0.1", 30000)),  # IPv4-mapped: the IPv4 address
    ("http://127.0.0.1:39103@1", ("http", "127.0.0.1", 39103)),
    ("  http://h:8000\n", ("http", "h", 8000)),
])
def test_identity_normalises_what_the_gateway_keeps_verbatim(url, identity):
    assert g.worker_identity(url) == identity


@pytest.mark.parametrize("url, words", [
    ("", "not an absolute http(s) URL"),
    ("node-1:30000", "not an absolute http(s) URL"),
    ("grpc://node-1:50051", "not an absolute http(s) URL"),
    ("ftp://node-1", "not an absolute http(s) URL"),
    ("http://", "not an absolute http(s) URL"),
    ("http://node-1:30000/v1", "not a server's base URL"),
    ("http://node-1:30000?x=1", "not a server's base URL"),
    ("http://admin@node-1:30000", "not a server's base URL"),
    ("http://node-1:99999", "not a valid URL"),
    ("http://.:30000", "not an absolute http(s) URL"),
    ("http://admin@1", "not a server's base URL"),
])
def test_a_url_that_is_not_a_server_base_url_is_refused(url, words):
    with pytest.raises(g.WorkerURLError, match=words.replace("(", r"\(").replace(")", r"\)")):
        g.worker_identity(url)


def test_the_dp_suffix_is_split_off_only_where_the_gateway_puts_it():
    assert g.split_dp_rank("http://127.0.0.1:39103@0") == ("http://127.0.0.1:39103", 0)
    assert g.split_dp_rank("http://h:8000@12") == ("http://h:8000", 12)
    # User info before the host is not a rank, and neither is anything after a path.
    assert g.split_dp_rank("http://user@h:8000") == ("http://user@h:8000", None)
    assert g.split_dp_rank("http://h:8000/x@1") == ("http://h:8000/x@1", None)
    assert g.split_dp_rank("http://user@1") == ("http://user@1", None)


def test_every_spelling_of_the_host_s_worker_is_drained():
    # The inventory's URL is one spelling; the gateway holds three. A raw-string match found one.
    found = g.workers_of(THREE_SPELLINGS, ["http://127.0.0.1:39101"], resolve=table({"localhost": ["127.0.0.1"]}))
    assert ids(found) == ["01a242ce-959c", "01a242ce-b9ca", "01a242ce-b9f4"]


def test_a_name_in_the_inventory_finds_the_address_at_the_gateway_and_back():
    resolve = table({"fleet-node-1": ["10.0.0.11", "fd00::11"], "fleet-node-2": ["10.0.0.12"]})
    entries = [{"id": "a", "url": "http://10.0.0.11:30000"}, {"id": "b", "url": "http://[fd00::11]:30000"},
               {"id": "c", "url": "http://10.0.0.12:30000"}, {"id": "d", "url": "http://fleet-node-1:30001"}]
    assert ids(g.workers_of(entries, ["http://fleet-node-1:30000"], resolve=resolve)) == ["a", "b"]
    assert ids(g.workers_of([{"id": "e", "url": "http://fleet-node-2:30000"}], ["http://10.0.0.12:30000"],
                            resolve=resolve)) == ["e"]
    # Without resolution only the names themselves are compared.
    assert g.workers_of(entries, ["http://fleet-node-1:30000"], resolve=None) == []


def test_a_name_that_does_not_resolve_matches_only_itself():
    resolve = table({})
    assert ids(g.workers_of([{"id": "a", "url": "http://gone:30000/"}, {"id": "b", "url": "http://10.0.0.1:30000"}],
                            ["http://gone:30000"], resolve=resolve)) == ["a"]


def test_real_resolution_of_localhost_on_the_controller():
    # socket.getaddrinfo itself (this machine's /etc/hosts): localhost is 127.0.0.1 (and maybe ::1).
    assert ids(g.workers_of(THREE_SPELLINGS, ["http://localhost:39101"])) == [
        "01a242ce-959c", "01a242ce-b9ca", "01a242ce-b9f4"]


def test_every_rank_of_a_data_parallel_worker_is_drained():
    assert ids(g.workers_of(DP_AWARE, ["http://127.0.0.1:39103"], resolve=None)) == ["01a242d0-7093", "01a242d0-defb"]
    assert ids(g.workers_of(DP_AWARE, ["http://127.0.0.1:39102/"], resolve=None)) == ["01a242d0-6cc8"]


def test_an_ipv4_mapped_address_is_its_ipv4_address():
    assert g.same_worker("http://[::ffff:10.0.0.1]:30000", "http://10.0.0.1:30000", resolve=None)
    assert not g.same_worker("http://[::1]:30000", "http://127.0.0.1:30000", resolve=None)


def test_another_port_or_scheme_is_another_worker():
    entries = [{"id": "a", "url": "http://127.0.0.1:39104"}, {"id": "b", "url": "https://127.0.0.1:39101"},
               {"id": "c", "url": "grpc://127.0.0.1:39101"}, {"id": "d"}]
    assert g.workers_of(entries, ["http://127.0.0.1:39101"], resolve=None) == []


def test_the_undrain_registers_only_what_the_gateway_holds_in_no_spelling():
    resolve = table({"localhost": ["127.0.0.1"]})
    urls = ["http://127.0.0.1:39101", "http://127.0.0.1:39105"]
    assert g.missing_workers(urls, THREE_SPELLINGS, resolve=resolve) == ["http://127.0.0.1:39105"]
    assert g.missing_workers(["http://127.0.0.1:39103"], DP_AWARE, resolve=None) == []
    assert g.missing_workers(urls, [], resolve=None) == urls


def test_a_bad_inventory_url_is_an_error_not_an_empty_match():
    with pytest.raises(g.WorkerURLError, match="not an absolute"):
        g.workers_of(THREE_SPELLINGS, ["127.0.0.1:39101"], resolve=None)


def test_the_filters_wrap_the_functions_and_name_themselves_in_errors():
    filters = f.FilterModule().filters()
    assert filters["gateway_workers_of"] is f.gateway_workers_of
    assert filters["gateway_missing_workers"] is f.gateway_missing_workers
    assert ids(f.gateway_workers_of(DP_AWARE, ["http://127.0.0.1:39103"])) == ["01a242d0-7093", "01a242d0-defb"]
    assert f.gateway_missing_workers(["http://127.0.0.1:39103/"], DP_AWARE) == []
    with pytest.raises(AnsibleFilterError, match="^gateway_workers_of: 'node:1' is not an absolute"):
        f.gateway_workers_of([], ["node:1"])
    with pytest.raises(AnsibleFilterError, match="^gateway_missing_workers: 'node:1' is not an absolute"):
        f.gateway_missing_workers(["node:1"], [])


def test_each_name_is_resolved_once_per_lookup():
    asked = []
    inner = table({"fleet-node-1": ["10.0.0.11"], "fleet-node-2": ["10.0.0.12"]})

    def resolve(host, port, proto=0):
        asked.append(host)
        return inner(host, port, proto)
    entries = [{"id": str(i), "url": "http://fleet-node-2:30000"} for i in range(5)] + [{"id": "x", "url": "http://gone:30000"}]
    assert g.workers_of(entries, ["http://fleet-node-1:30000"], resolve=resolve) == []
    assert sorted(asked) == ["fleet-node-1", "fleet-node-2", "gone"]
    asked.clear()
    urls = ["http://fleet-node-1:30000", "http://10.0.0.12:30000", "http://fleet-node-1:30000/"]
    assert g.missing_workers(urls, entries, resolve=resolve) == ["http://fleet-node-1:30000", "http://fleet-node-1:30000/"]
    assert sorted(asked) == ["fleet-node-1", "fleet-node-2", "gone"]


def test_two_names_of_one_address_are_the_same_worker_when_resolved():
    resolve = table({"node-a": ["10.0.0.1"], "node-a.lab": ["10.0.0.1"]})
    assert g.same_worker("http://node-a:30000", "http://node-a.lab:30000", resolve=resolve)
    assert not g.same_worker("http://node-a:30000", "http://node-a.lab:30000", resolve=None)


def test_an_entry_is_known_by_its_data_parallel_base_url_first():
    assert g.entry_url({"url": "http://10.0.0.1:30000@1", "dp_base_url": "http://10.0.0.1:30000"}) == "http://10.0.0.1:30000"
    assert g.entry_url({"url": "http://10.0.0.1:30000"}) == "http://10.0.0.1:30000"
    assert g.entry_url({"id": "u-1"}) == ""


@pytest.mark.parametrize("address, url", [
    ("fd00::5", "http://[fd00::5]:30000"), ("[fd00::5]", "http://[fd00::5]:30000"), (" 10.0.0.1 ", "http://10.0.0.1:30000"),
    ("node-1", "http://node-1:30000"), ("[node-1", "http://[node-1:30000"), ("fd00::5]", "http://fd00::5]:30000"),
])
def test_worker_url_brackets_an_ipv6_literal_once(address, url):
    assert g.worker_url(address, "30000") == url


# ---- what the mutation run found untested ----

def strict(names):
    """table(), asking as the matcher must: the port of the URL and TCP."""
    inner = table(names)

    def resolve(host, port, proto=0):
        assert isinstance(port, int) and proto == socket.IPPROTO_TCP, (host, port, proto)
        return inner(host, port, proto)
    return resolve


def test_a_scoped_ipv6_answer_is_its_address_and_the_resolver_is_asked_for_tcp_at_the_port():
    resolve = strict({"node-a": ["fe80::1%eth0"]})
    assert g.same_worker("http://node-a:30000", "http://[fe80::1]:30000", resolve=resolve)
    assert g.workers_of([{"id": "a", "url": "http://[fe80::1]:30000"}], ["http://node-a:30000"], resolve=resolve)


def test_a_worker_is_matched_against_every_wanted_one_not_only_the_first_of_its_port():
    wanted = ["https://node-b:30000", "http://node-c:30001", "http://node-a:30000"]
    entries = [{"id": "a", "url": "http://node-a:30000"}]
    assert ids(g.workers_of(entries, wanted, resolve=None)) == ["a"]


def test_names_that_resolve_to_one_address_are_one_worker_in_every_manifest_state():
    resolve = strict({"node-a": ["10.0.0.1"], "node-a.lab": ["10.0.0.1"]})
    entries = [{"url": "http://10.0.0.1:30000", "id": "kept"}]
    # present: the inventory's name is the entry the manifest holds by address (kept, not added again)
    assert g.edit_manifest(entries, [], ["http://node-a:30000", "http://node-a.lab:30000"], "present", resolve) == (
        entries, [], [], [])
    # drained: out of the manifest, recorded once
    assert g.edit_manifest(entries, [], ["http://node-a:30000"], "drained", resolve) == (
        [], ["http://node-a:30000"], [], ["http://10.0.0.1:30000"])
    assert g.edit_manifest([], ["http://node-a.lab:30000"], ["http://node-a:30000"], "drained", resolve) == (
        [], ["http://node-a.lab:30000"], [], [])
    # present while drained under another name: stays out
    assert g.edit_manifest(entries, ["http://node-a.lab:30000"], ["http://node-a:30000"], "present", resolve) == (
        [], ["http://node-a.lab:30000"], [], ["http://10.0.0.1:30000"])
    # undrained: back, unless the manifest holds it by its address
    assert g.edit_manifest(entries, ["http://node-a.lab:30000"], ["http://node-a:30000"], "undrained", resolve) == (
        entries, [], [], [])
    # two entries of one worker under two names: one is kept
    two = [{"url": "http://node-a:30000"}, {"url": "http://node-a.lab:30000"}]
    assert g.edit_manifest(two, [], ["http://node-a:30000"], "present", resolve) == (
        two[:1], [], [], ["http://node-a.lab:30000"])


@pytest.mark.parametrize("document, error", [
    ([], "the manifest must be {\"version\": 1, \"workers\": [...]}, got []"),
    ({"version": 1, "workers": "http://a:1"}, "the manifest's workers must be a list, got 'http://a:1'"),
    ({"version": 1, "workers": [{"url": "http://a:1", "labels": {}}]},
     "a manifest worker is a dict with url and only %s, got {'url': 'http://a:1', 'labels': {}}"
     % ", ".join(g.MANIFEST_WORKER_FIELDS)),
    ({"version": 1, "workers": [{"id": "u-1"}]},
     "a manifest worker is a dict with url and only %s, got {'id': 'u-1'}" % ", ".join(g.MANIFEST_WORKER_FIELDS)),
    ({"version": 1, "workers": [{"url": "http://a:1/v1"}]},
     "manifest worker: 'http://a:1/v1' is not a server's base URL (http://host:port, no path, query or user)"),
])
def test_a_manifest_the_gateway_would_refuse_is_named_whole(document, error):
    with pytest.raises(g.ManifestError) as refused:
        g.manifest_workers(document)
    assert str(refused.value) == error


def test_an_unknown_state_and_bad_urls_are_named_whole():
    with pytest.raises(g.ManifestError) as refused:
        g.edit_manifest([], [], [], "gone")
    assert str(refused.value) == "state must be one of present, drained, undrained, got 'gone'"
    with pytest.raises(g.WorkerURLError) as refused:
        g.worker_identity("http://[::1")
    assert str(refused.value) == "'http://[::1' is not a valid URL (Invalid IPv6 URL)"
    with pytest.raises(g.WorkerURLError) as refused:
        g.worker_identity("http://.:30000")
    assert str(refused.value) == "'http://.:30000' is not an absolute http(s) URL (http://host:port)"
    assert g.manifest_workers("") == [] and g.manifest_workers(None) == []


def test_worker_url_takes_the_brackets_off_an_address_that_is_not_ipv6():
    assert g.worker_url("[10.0.0.5]", 1) == "http://10.0.0.5:1"


def test_a_worker_named_twice_in_the_inventory_is_added_once():
    resolve = strict({"node-a": ["10.0.0.1"], "node-a.lab": ["10.0.0.1"]})
    wanted = ["http://node-a:30000", "http://node-a:30000/", "http://node-a.lab:30000"]
    assert g.edit_manifest([], [], wanted, "present", resolve) == (
        [{"url": "http://node-a:30000"}], [], ["http://node-a:30000"], [])

"""module_utils/in_place.py: which rendered files the template tasks must write."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.in_place import InPlaceError, stale_paths
from ansible_collections.blackwell.sglang.plugins.filter.files import files_stale
from ansible.errors import AnsibleFilterError

SHA = "a" * 40
WANTED = {"path": "/etc/sglang/flashinfer.env", "checksum": SHA, "owner": "root", "group": "sglang", "mode": "0644"}


def found(**changes):
    entry = {"path": WANTED["path"], "isreg": True, "checksum": SHA, "pw_name": "root", "gr_name": "sglang", "mode": "0644"}
    entry.update(changes)
    return [entry]


def test_a_file_as_rendered_is_in_place():
    assert stale_paths([WANTED], found()) == []


@pytest.mark.parametrize("changes", [
    {"checksum": "b" * 40},            # edited
    {"pw_name": "sglang"},             # chowned
    {"gr_name": "root"},               # chgrp'ed
    {"mode": "0666"},                  # chmod'ed
    {"isreg": False},                  # a symlink or directory in its place (find gives no checksum)
])
def test_any_difference_makes_it_stale(changes):
    assert stale_paths([WANTED], found(**changes)) == [WANTED["path"]]


def test_a_missing_file_is_stale_and_order_is_kept():
    other = dict(WANTED, path="/etc/sglang/sglang-eagle3.env")
    assert stale_paths([other, WANTED], found()) == [other["path"]]
    assert stale_paths([WANTED, other], []) == [WANTED["path"], other["path"]]


def test_a_file_found_elsewhere_does_not_count():
    assert stale_paths([WANTED], found(path="/etc/sglang/old/flashinfer.env")) == [WANTED["path"]]


@pytest.mark.parametrize("mode", ["644", "0644", 0o644])
def test_modes_compare_as_numbers(mode):
    assert stale_paths([dict(WANTED, mode=mode)], found()) == []


def test_bad_input_is_a_clear_error():
    with pytest.raises(InPlaceError, match="^each wanted file needs path, checksum, owner, group and mode; .* has no checksum"):
        stale_paths([{"path": "/x", "owner": "root", "group": "root", "mode": "0644"}], [])
    with pytest.raises(AnsibleFilterError, match="^mode of /etc/sglang/flashinfer.env must be an octal string such as '0644'") as error:
        files_stale([dict(WANTED, mode="rw-r--r--")], found())
    assert str(error.value).startswith("mode of /etc/sglang/flashinfer.env")  # the sentence itself, first

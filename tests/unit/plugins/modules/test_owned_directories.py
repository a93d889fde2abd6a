"""The owned_directories module: the roles create their directories and change owner, group and mode
only of those they own (created, or named for sglang); a foreign directory is used as it is when the
service user already has the access it needs, refused otherwise, and never changed, in normal and in
check mode. Real directories, users and groups of this machine (root, nobody/nogroup, daemon,
shadow), outside /tmp (the module refuses paths there); root only, as the roles run it."""

import grp
import json
import os
import pwd
import shutil
import tempfile

import pytest

import module_runner
from ansible_collections.blackwell.sglang.plugins.modules import owned_directories

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the module changes owners: root only, as the roles run it")
NOBODY = "nobody"
NOGROUP = grp.getgrgid(pwd.getpwnam(NOBODY).pw_gid).gr_name  # its group (nogroup on Debian)


@pytest.fixture
def base():
    """A scratch directory that is not under /tmp (refused) and whose path does not name sglang."""
    parent = [path for path in ("/var/local", "/srv", "/opt") if os.path.isdir(path)][0]
    path = tempfile.mkdtemp(prefix="owned-dirs-", dir=parent)
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path)


def run(capsys, base, directories, check_mode=False, record=None):
    args = {"directories": directories, "record": record or os.path.join(base, "record", "created.json")}
    return module_runner.run_module(owned_directories.main, capsys, args, check_mode=check_mode)


def item(path, variable="kernel_cache_dir", owner=NOBODY, group=NOGROUP, mode="0750", user=NOBODY, access="write"):
    return {"path": path, "variable": variable, "owner": owner, "group": group, "mode": mode, "user": user, "access": access}


def stat_of(path):
    st = os.stat(path)
    return (st.st_uid, st.st_gid, st.st_mode, st.st_mtime_ns, st.st_ino, sorted(os.listdir(path)))


def foreign(base, name, owner, group, mode):
    path = os.path.join(base, name)
    os.mkdir(path)
    os.chown(path, pwd.getpwnam(owner).pw_uid, grp.getgrnam(group).gr_gid)
    os.chmod(path, mode)
    return path


def test_a_missing_directory_is_created_recorded_and_then_left_alone(capsys, base):
    path = os.path.join(base, "a", "b")
    old = os.umask(0o077)
    try:
        result = run(capsys, base, [item(path)])
    finally:
        os.umask(old)
    assert result["_rc"] == 0 and result["changed"]
    assert result["created"] == [os.path.join(base, "a"), path]
    assert result["directories"] == [{"path": path, "variable": "kernel_cache_dir", "state": "created"}]
    st = os.stat(path)
    assert (pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name, oct(st.st_mode & 0o7777)) == (NOBODY, NOGROUP, "0o750")
    parent = os.stat(os.path.join(base, "a"))
    assert (parent.st_uid, parent.st_gid, oct(parent.st_mode & 0o7777)) == (0, 0, "0o755")  # whatever the umask
    record = json.loads(open(os.path.join(base, "record", "created.json")).read())
    assert record == {"version": 1, "directories": {os.path.join(base, "a"): {"inode": parent.st_ino}, path: {"inode": st.st_ino}}}
    assert oct(os.stat(os.path.join(base, "record", "created.json")).st_mode & 0o777) == "0o644"
    again = run(capsys, base, [item(path)])
    assert not again["changed"] and again["created"] == []
    assert again["directories"][0]["state"] == "unchanged"
    # A directory gone since leaves the record the next time it is written.
    os.rmdir(path)
    run(capsys, base, [item(os.path.join(base, "c"))])
    record = json.loads(open(os.path.join(base, "record", "created.json")).read())
    assert sorted(record["directories"]) == [os.path.join(base, "a"), os.path.join(base, "c")]


def test_a_directory_it_created_is_kept_as_the_role_says(capsys, base):
    path = os.path.join(base, "cache")
    run(capsys, base, [item(path)])
    os.chmod(path, 0o777)
    os.chown(path, 0, 0)
    result = run(capsys, base, [item(path)])
    assert result["changed"] and result["directories"][0]["state"] == "changed"
    st = os.stat(path)
    assert (st.st_uid, oct(st.st_mode & 0o7777)) == (pwd.getpwnam(NOBODY).pw_uid, "0o750")


def test_a_directory_named_for_sglang_is_the_roles_own(capsys, base):
    path = foreign(base, "sglang-cache", "daemon", "daemon", 0o700)
    result = run(capsys, base, [item(path)])
    assert result["_rc"] == 0 and result["directories"][0]["state"] == "changed"
    assert os.stat(path).st_uid == pwd.getpwnam(NOBODY).pw_uid
    inner = foreign(path, "inner", "daemon", "daemon", 0o700)  # below a directory named for it too
    assert run(capsys, base, [item(inner)])["directories"][0]["state"] == "changed"


# One case per kind of foreign directory: system configuration (as /etc/sudoers.d, root:root 0750),
# secrets (as /etc/ssl/private, root:shadow 0710), another package's data (daemon's, 0755, to write
# into), and one every user may write into (the service could use it, and so could anyone).
GIVE = "give %s that access" % NOBODY
FOREIGN = [
    ("system-config", "root", "root", 0o750, "sglang_services_env_dir", "read",
     "%s needs to read and enter it (r-x) and may not" % NOBODY, GIVE),
    ("secrets", "root", "shadow", 0o710, "flashinfer_env_file", "read", "%s needs to read and enter it (r-x) and may not" % NOBODY,
     GIVE),
    ("package-data", "daemon", "daemon", 0o755, "kernel_cache_dir", "write",
     "%s needs to create files in it (rwx) and may not" % NOBODY, GIVE),
    ("shared-scratch", "root", "root", 0o777, "sglang_venv_home", "write", "every user may write into it",
     "take every user's write access away"),
    ("shared-locked", "root", "root", 0o773, "sglang_venv_home", "read",
     "every user may write into it; %s needs to read and enter it (r-x) and may not" % NOBODY,
     "take every user's write access away and " + GIVE),
]


@pytest.mark.parametrize("check_mode", [False, True], ids=["normal", "check"])
@pytest.mark.parametrize("name, owner, group, mode, variable, access, why, advice", FOREIGN, ids=[case[0] for case in FOREIGN])
def test_a_foreign_directory_that_does_not_fit_is_refused_unchanged(
        capsys, base, check_mode, name, owner, group, mode, variable, access, why, advice):
    path = foreign(base, name, owner, group, mode)
    before = stat_of(path)
    # A directory of its own first: nothing is created either when one is refused.
    own = os.path.join(base, "new")
    result = run(capsys, base, [item(own), item(path, variable=variable, mode="0755", access=access)], check_mode=check_mode)
    assert result["_rc"] == 1
    assert result["msg"] == (
        "%s: %s exists and is not the roles' own (they did not create it and no part of its path names sglang): "
        "owner %s, group %s, mode %04o; %s. The roles change the owner, group and mode only of directories they created: "
        "set %s to a directory of its own (a new path, or one named for sglang), or %s yourself"
        % (variable, path, owner, group, mode, why, variable, advice))
    assert result["problems"] == [result["msg"]]
    assert stat_of(path) == before
    assert not os.path.exists(own) and not os.path.exists(os.path.join(base, "record"))


@pytest.mark.parametrize("check_mode", [False, True], ids=["normal", "check"])
def test_a_foreign_directory_that_fits_is_used_as_it_is(capsys, base, check_mode):
    # The service user may write in by the group (nobody's own group), read by the other bits.
    by_group = foreign(base, "shared", "daemon", NOGROUP, 0o2770)
    by_other = foreign(base, "readable", "daemon", "daemon", 0o755)
    before = [stat_of(by_group), stat_of(by_other)]
    result = run(capsys, base, [item(by_group), item(by_other, variable="sglang_services_env_dir", access="read")],
                 check_mode=check_mode)
    assert result["_rc"] == 0 and not result["changed"]
    assert [entry["state"] for entry in result["directories"]] == ["foreign", "foreign"]
    assert [stat_of(by_group), stat_of(by_other)] == before


def test_owner_bits_decide_for_the_owner_even_when_the_others_may(capsys, base):
    path = foreign(base, "owner-locked", NOBODY, "daemon", 0o057)  # the kernel reads the owner's bits first
    result = run(capsys, base, [item(path, access="read")])
    assert result["_rc"] == 1 and "%s needs to read and enter it (r-x) and may not" % NOBODY in result["msg"]


def test_root_only_and_root_as_user_need_no_access(capsys, base):
    path = foreign(base, "locked", "daemon", "daemon", 0o700)
    assert run(capsys, base, [item(path, user=None, access="none")])["directories"][0]["state"] == "foreign"
    assert run(capsys, base, [item(path, user="root")])["directories"][0]["state"] == "foreign"


def test_a_user_not_made_yet_counts_as_a_member_of_its_group(capsys, base):
    path = foreign(base, "for-the-group", "root", NOGROUP, 0o770)
    ok = run(capsys, base, [item(path, user="no-such-user-7", group=NOGROUP)], check_mode=True)
    assert ok["_rc"] == 0 and ok["directories"][0]["state"] == "foreign"
    refused = run(capsys, base, [item(path, user="no-such-user-7", group="daemon")], check_mode=True)
    assert "no-such-user-7 needs to create files in it (rwx) and may not (the user does not exist yet)" in refused["msg"]


def test_an_owner_not_made_yet_is_a_change_in_check_mode_and_refused_otherwise(capsys, base):
    path = os.path.join(base, "later")
    result = run(capsys, base, [item(path, owner="no-such-user-7")], check_mode=True)
    assert result["_rc"] == 0 and result["changed"] and result["created"] == [path]
    assert not os.path.exists(path)
    result = run(capsys, base, [item(path, owner="no-such-user-7", group="no-such-group-7")])
    assert result["problems"] == [
        "kernel_cache_dir: the owner no-such-user-7 of %s does not exist (the role creates it before this task)" % path,
        "kernel_cache_dir: the group no-such-group-7 of %s does not exist (the role creates it before this task)" % path]
    assert not os.path.exists(path)


def test_check_mode_creates_nothing_and_writes_no_record(capsys, base):
    path = os.path.join(base, "x", "y")
    result = run(capsys, base, [item(path), item(path + "/z")], check_mode=True)
    assert result["changed"] and result["created"] == [os.path.join(base, "x"), path, path + "/z"]
    assert os.listdir(base) == []


def test_a_directory_made_again_by_someone_else_is_foreign(capsys, base):
    path = os.path.join(base, "cache")
    run(capsys, base, [item(path)])
    os.rmdir(path)
    os.mkdir(os.path.join(base, "holder"))  # takes the freed inode number, if the file system reuses it at once
    foreign(base, "cache", "daemon", "daemon", 0o755)
    if os.stat(path).st_ino == json.load(open(os.path.join(base, "record", "created.json")))["directories"][path]["inode"]:
        pytest.skip("the file system gave the new directory the old inode number")
    result = run(capsys, base, [item(path)])
    assert result["_rc"] == 1 and "%s exists and is not the roles' own" % path in result["msg"]


def test_a_link_is_judged_by_where_it_leads(capsys, base):
    target = foreign(base, "elsewhere", "root", "root", 0o750)
    link = os.path.join(base, "sglang-env")  # named for sglang, but it leads to a foreign directory
    os.symlink(target, link)
    result = run(capsys, base, [item(link, variable="sglang_services_env_dir", access="read")])
    assert result["msg"].startswith("sglang_services_env_dir: %s exists and is not the roles' own" % target)


@pytest.mark.parametrize("entry, message", [
    (item("/etc", variable="sglang_services_env_dir"),
     "sglang_services_env_dir is /etc, a directory the system shares; the roles keep their files out of it. "
     "Use a directory of its own, e.g. /etc/sglang"),
    (item("/tmp/cache"), "kernel_cache_dir is /tmp/cache, under /tmp/ (not kept on disk, or cleared); use a directory of its own"),
    (item("relative"), "kernel_cache_dir must be an absolute path (start with /), got 'relative'"),
    (item("/srv/x", mode="4755"), "kernel_cache_dir: mode '4755' is not an octal mode like 0755"),
    (item("/srv/x", user=None), "kernel_cache_dir: /srv/x needs a user (the one that uses it) for access write"),
])
def test_bad_input_is_named(capsys, base, entry, message):
    result = run(capsys, base, [entry])
    assert result["_rc"] == 1 and result["problems"] == [message]


def test_a_file_in_the_way_is_named(capsys, base):
    path = os.path.join(base, "file")
    open(path, "w").close()
    assert run(capsys, base, [item(path)])["msg"] == "kernel_cache_dir: %s exists and is not a directory" % path


@pytest.mark.parametrize("text, said", [
    ("{", "not JSON"),
    ('{"version": 2, "directories": {}}', 'not a version 1 record'),
    ('{"version": 1, "directories": {"/x": {}}}', "the entry of /x has no inode number"),
])
def test_a_damaged_record_stops_the_module_and_is_kept(capsys, base, text, said):
    os.mkdir(os.path.join(base, "record"))
    record = os.path.join(base, "record", "created.json")
    with open(record, "w") as handle:
        handle.write(text)
    result = run(capsys, base, [item(os.path.join(base, "new"))])
    assert result["_rc"] == 1
    assert result["msg"].startswith("the record of created directories %s is %s" % (record, said))
    assert result["msg"].endswith("it is kept as it is: move it aside and run again (the directories it named then count as "
                                  "not the roles' own, used as they are where they fit)")
    assert open(record).read() == text and not os.path.exists(os.path.join(base, "new"))


def test_an_unreadable_record_stops_the_module_before_any_change(capsys, base):
    blocker = os.path.join(base, "record")
    open(blocker, "w").close()  # a file where the record's directory should be
    result = run(capsys, base, [item(os.path.join(base, "new"))])
    assert result["_rc"] == 1 and not os.path.exists(os.path.join(base, "new"))
    assert result["msg"] == "cannot read the record of created directories %s/created.json: [Errno 20] Not a directory: '%s/created.json'" % (
        blocker, blocker)


def test_a_failure_midway_keeps_what_was_created_and_names_the_record(capsys, base):
    # /proc takes no new directory: the record cannot be written after the directory was made.
    record = "/proc/owned-dirs-test/created.json"
    result = run(capsys, base, [item(os.path.join(base, "new"))], record=record)
    assert result["_rc"] == 1 and result["created"] == [os.path.join(base, "new")]
    assert result["msg"].startswith("cannot write the record of created directories %s: " % record)
    assert os.path.isdir(os.path.join(base, "new"))


@pytest.mark.parametrize("check_mode", [False, True], ids=["normal", "check"])
def test_the_advice_works(capsys, base, check_mode):
    """Refused, then the advice followed as written (the operator's own chgrp/chmod): the next run uses it as it is."""
    path = foreign(base, "kernels", "daemon", "daemon", 0o755)
    refused = run(capsys, base, [item(path)], check_mode=check_mode)
    assert refused["msg"].endswith("or give %s that access yourself" % NOBODY)
    os.chown(path, -1, grp.getgrnam(NOGROUP).gr_gid)  # give nobody the access: rwx by its group
    os.chmod(path, 0o2775)
    result = run(capsys, base, [item(path)], check_mode=check_mode)
    assert result["_rc"] == 0 and result["directories"][0]["state"] == "foreign"
    # The other way out it names: a new path.
    assert run(capsys, base, [item(os.path.join(base, "new"))], check_mode=check_mode)["_rc"] == 0


def test_a_link_the_service_user_could_change_is_not_followed(capsys, base):
    # The workspace attack: kernel_cache_dir is the service user's; a link put there in place of a
    # workspace must not make root hand one of its own directories over.
    cache = foreign(base, "kernels", NOBODY, NOGROUP, 0o755)
    target = foreign(base, "sglang-root-only", "root", "root", 0o700)  # named for sglang: it would be taken
    os.symlink(target, os.path.join(cache, "venv-id"))
    before = stat_of(target)
    result = run(capsys, base, [item(os.path.join(cache, "venv-id"))])
    assert result["problems"] == [
        "kernel_cache_dir: %s/venv-id is reached through the symbolic link %s/venv-id, in %s, which a user other than root "
        "may change (owner %s, mode 0755); name the directory itself" % (cache, cache, cache, NOBODY)]
    assert stat_of(target) == before


def test_a_link_to_a_system_directory_is_refused_as_that_directory(capsys, base):
    link = os.path.join(base, "sglang")
    os.symlink("/etc", link)
    assert run(capsys, base, [item(link, variable="sglang_services_env_dir", access="read")])["problems"] == [
        "sglang_services_env_dir is /etc, a directory the system shares; the roles keep their files out of it. "
        "Use a directory of its own, e.g. /etc/sglang"]


def test_a_directory_the_user_cannot_reach_is_refused(capsys, base):
    closed = foreign(base, "closed", "root", "root", 0o700)
    result = run(capsys, base, [item(os.path.join(closed, "sglang"))])
    assert result["problems"] == [
        "kernel_cache_dir: %s may not enter %s (owner root, group root, mode 0700) on the way to %s/sglang; choose a "
        "directory it can reach" % (NOBODY, closed, closed)]
    assert os.listdir(closed) == []


def test_an_entry_made_as_the_parent_of_an_earlier_one_gets_its_own_owner_and_mode(capsys, base):
    parent, child = os.path.join(base, "p"), os.path.join(base, "p", "c")
    result = run(capsys, base, [item(child), item(parent, mode="0755")])
    assert result["created"] == [parent, child]
    st = os.stat(parent)
    assert (st.st_uid, oct(st.st_mode & 0o7777)) == (pwd.getpwnam(NOBODY).pw_uid, "0o755")
    assert not run(capsys, base, [item(child), item(parent, mode="0755")])["changed"]


def test_a_path_that_only_holds_the_word_is_not_named_for_the_collection(capsys, base):
    path = foreign(base, "team-sglang-models", "daemon", "daemon", 0o700)
    assert "exists and is not the roles' own" in run(capsys, base, [item(path)])["msg"]
    assert os.stat(path).st_uid == pwd.getpwnam("daemon").pw_uid

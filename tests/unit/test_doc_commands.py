"""Every `ansible-playbook` command in the docs still runs as written.

Read: README.md, docs/**/*.md and roles/*/README.md. A command is a line of a fenced code block
(``` or ~~~) that starts with `ansible-playbook` (after an optional `$ `; a trailing `\\` joins the
next line; a `#` comment is dropped), or an inline code span that starts with `ansible-playbook `.
Each must name a playbook file that exists in this repository. The commands are grouped by
(playbook, inventory) and each group is syntax-checked once
(`ansible-playbook --syntax-check`, the collection resolved from this checkout as
`blackwell.sglang`, as `scripts/env.sh` sets it up):

- `-i`/`--inventory`: used when it exists in the repository (`inventories/example`,
  `inventories/lab`); an inventory the docs ask you to make (`inventories/mine`, a copy of
  `inventories/example`) is replaced by `-i localhost,` and the group's `--limit` is dropped;
- `-e`/`--extra-vars`: every value of the group is passed;
- `--limit`/`-l`: the group's patterns are passed as one union (`a:b`); Ansible refuses a limit that
  leaves no host of the inventory;
- `--check`, `--diff`, `--tags`, `--skip-tags`: passed;
- `--ask-vault-pass`, `--vault-password-file`, `--vault-id`, `-v...`: dropped (they prompt or only
  change output);
- any other flag fails the test, naming the file and the command, so a new one is decided here.
"""

import glob
import os
import re
import shlex
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE = re.compile(r"`(ansible-playbook [^`]+)`")
WITH_VALUE_PASSED = {"-e": "-e", "--extra-vars": "-e", "-t": "--tags", "--tags": "--tags", "--skip-tags": "--skip-tags"}
WITH_VALUE_DROPPED = {"--vault-password-file", "--vault-id"}
FLAGS_PASSED = {"--check", "-C", "--diff", "-D"}
FLAGS_DROPPED = {"--ask-vault-pass", "-J", "--ask-vault-password"}


def doc_files():
    files = [os.path.join(ROOT, "README.md")]
    files += glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
    files += glob.glob(os.path.join(ROOT, "roles", "*", "README.md"))
    return sorted(f for f in files if os.path.isfile(f))


def commands_in(text):
    """The ansible-playbook command lines of one Markdown text (see the module's docstring)."""
    found = []
    in_fence = False
    pending = None
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence, pending = not in_fence, None
            continue
        if in_fence:
            stripped = line.strip()
            if pending is not None:
                pending += " " + stripped.rstrip("\\").strip()
                if not stripped.endswith("\\"):
                    found.append(pending)
                    pending = None
                continue
            if stripped.startswith("$ "):
                stripped = stripped[2:]
            if stripped.startswith("ansible-playbook "):
                if stripped.endswith("\\"):
                    pending = stripped.rstrip("\\").strip()
                else:
                    found.append(stripped)
        else:
            found.extend(INLINE.findall(line))
    return found


def parse(command):
    """(playbook, inventory, extra vars, limits, flags passed as tuples); ValueError on an unknown flag."""
    words = shlex.split(command, comments=True)[1:]
    playbooks, inventory, extra, limits, flags = [], None, [], [], []
    i = 0
    while i < len(words):
        word = words[i]
        name, _sep, inline_value = word.partition("=") if word.startswith("--") else (word, "", "")
        takes_value = name in ("-i", "--inventory", "-l", "--limit") or name in WITH_VALUE_PASSED or name in WITH_VALUE_DROPPED
        if takes_value:
            if inline_value:
                value = inline_value
            else:
                i += 1
                if i >= len(words):
                    raise ValueError("%s has no value" % name)
                value = words[i]
            if name in ("-i", "--inventory"):
                inventory = value
            elif name in ("-l", "--limit"):
                limits.append(value)
            elif WITH_VALUE_PASSED.get(name) == "-e":
                extra.append(value)
            elif name in WITH_VALUE_PASSED:
                flags.append((WITH_VALUE_PASSED[name], value))
        elif word in FLAGS_PASSED:
            flags.append((word,))
        elif word in FLAGS_DROPPED or re.fullmatch(r"-v+", word):
            pass
        elif word.startswith("-"):
            raise ValueError("unknown flag %s (decide in tests/unit/test_doc_commands.py)" % word)
        else:
            playbooks.append(word)
        i += 1
    if len(playbooks) != 1:
        raise ValueError("expected one playbook, found %s" % (playbooks or "none"))
    return playbooks[0], inventory, extra, limits, flags


def all_commands():
    found = []
    for path in doc_files():
        with open(path) as handle:
            for command in commands_in(handle.read()):
                found.append((os.path.relpath(path, ROOT), command))
    return found


def groups():
    """{(playbook, inventory): [(doc, command, extra, limits, flags)]} plus the problems found on the way."""
    grouped, problems = {}, []
    for doc, command in all_commands():
        try:
            playbook, inventory, extra, limits, flags = parse(command)
        except ValueError as exc:
            problems.append("%s: %s: %s" % (doc, command, exc))
            continue
        grouped.setdefault((playbook, inventory), []).append((doc, command, extra, limits, flags))
    return grouped, problems


def test_the_docs_have_commands():
    docs = {doc for doc, _command in all_commands()}
    assert "README.md" in docs, "README.md has no ansible-playbook command"
    assert len(all_commands()) >= 5, all_commands()


def test_the_parse():
    text = "\n".join([
        "```sh", "ansible-playbook -i inventories/example playbooks/rollout.yml \\",
        "  -e rollout_drain=sglang_router -e '{\"rollout_serial\": [1]}'   # a comment", "```",
        "Run `ansible-playbook -i inventories/lab site.yml --check --diff` by hand.",
    ])
    assert commands_in(text) == [
        "ansible-playbook -i inventories/example playbooks/rollout.yml -e rollout_drain=sglang_router"
        " -e '{\"rollout_serial\": [1]}'   # a comment",
        "ansible-playbook -i inventories/lab site.yml --check --diff",
    ]
    assert parse(commands_in(text)[0]) == (
        "playbooks/rollout.yml", "inventories/example", ["rollout_drain=sglang_router", '{"rollout_serial": [1]}'], [], [])
    with pytest.raises(ValueError, match="unknown flag --frobnicate"):
        parse("ansible-playbook site.yml --frobnicate")


def test_every_command_parses():
    _grouped, problems = groups()
    assert not problems, "\n".join(problems)


def test_every_command_names_a_playbook_that_exists():
    grouped, _problems = groups()
    missing = ["%s: %s: no playbook %s in the repository" % (doc, command, playbook)
               for (playbook, _inventory), uses in grouped.items() for doc, command, *_rest in uses
               if not os.path.isfile(os.path.join(ROOT, playbook))]
    assert not missing, "\n".join(missing)


def _pairs():
    grouped, _problems = groups()
    return sorted(grouped.items(), key=lambda item: (item[0][0], item[0][1] or ""))


@pytest.mark.parametrize("pair", [key for key, _uses in _pairs()], ids=lambda key: "%s@%s" % (key[0], key[1]))
def test_syntax_check(pair):
    playbook, inventory = pair
    uses = dict(_pairs())[pair]
    if not os.path.isfile(os.path.join(ROOT, playbook)):
        pytest.skip("no playbook %s (test_every_command_names_a_playbook_that_exists says so)" % playbook)
    argv = ["ansible-playbook", "--syntax-check", playbook]
    known = inventory is not None and os.path.exists(os.path.join(ROOT, inventory))
    argv += ["-i", inventory] if known else ["-i", "localhost,"]
    extra, limits, flags = [], [], []
    for _doc, _command, use_extra, use_limits, use_flags in uses:
        extra += [x for x in use_extra if x not in extra]
        limits += [x for x in use_limits if x not in limits]
        flags += [x for x in use_flags if x not in flags]
    for value in extra:
        argv += ["-e", value]
    if limits and known:
        argv += ["--limit", ":".join(limits)]
    for flag in flags:
        argv += list(flag)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"))
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    where = "\n".join("  %s: %s" % (doc, command) for doc, command, *_rest in uses)
    assert proc.returncode == 0, "%s failed (rc %d) for the commands\n%s\n%s%s" % (
        " ".join(shlex.quote(a) for a in argv), proc.returncode, where, proc.stdout[-2000:], proc.stderr[-3000:])

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gateway_manifest
short_description: The SGLang model gateway's worker manifest, and which workers a rollout has drained
version_added: 0.1.0
author: blackwell.sglang developers (!UNKNOWN)
description:
  - Edits the worker manifest of the SGLang model gateway (PyPI C(smg), Shepherd Model Gateway) as the
    C(blackwell.sglang.sglang_gateway) role runs it - its launcher gives the manifest's workers to
    smg as C(--worker-urls) at each start, so a restart starts from the manifest, and the manifest is
    the rotation. It changes no running gateway; the role and the rollout's drain make the same change
    through smg's worker API (C(POST /workers), C(DELETE /workers/{id})).
  - Beside it, O(drained_path) lists the workers a rollout took out (the gateway never reads it), so
    that neither a restart of the gateway nor a run of its role (O(state=present)) puts back a worker
    whose host is out of rotation.
  - Workers are compared by identity, not by string (C(plugins/module_utils/gateway.py)) -
    scheme, host and port normalised, names resolved on the gateway host - so a host's worker is
    found in whatever spelling the manifest holds it, and never added a second time (smg refuses a
    manifest in which two entries name the same endpoint, and then keeps serving its previous one).
  - Both files are written atomically (a rename in their directory) under an exclusive lock on
    C(<path>.lock), so the hosts of one batch can drain at the same time.
  - Fails, changing nothing, when a worker is not an absolute http(s) URL, when the manifest or the
    drained list on the host is not what smg and this module write (invalid JSON, unknown fields, a
    bad URL), or when a file cannot be written (the OS error is named).
  - >-
    The manifest's format is smg's file-discovery format (measured on 1.13.0, strict) - C({"version": 1, "workers":
    [{"url": ...}, ...]}), each worker with C(url) and only C(id), C(worker_type), C(bootstrap_port),
    C(model_id), C(kv_connector), C(kv_role), C(kv_engine_id). Entries this module keeps are kept
    as they are.
options:
  path:
    description: The manifest (read by the gateway's launcher at each start); its directory must exist.
    type: path
    required: true
  drained_path:
    description: The list of drained workers (a JSON list of URLs). Default C(drained.json) beside O(path).
    type: path
  workers:
    description:
      - Worker URLs (C(http://host:port)). For O(state=present), every worker of the gateway; for
        O(state=drained) and O(state=undrained), one host's workers.
    type: list
    elements: str
    default: []
  state:
    description:
      - C(present) - the manifest lists exactly O(workers), except those drained; a drained record of
        a worker that is no longer in O(workers) is dropped.
      - C(drained) - O(workers) leave the manifest (every spelling of each) and are recorded as drained.
      - C(undrained) - they leave the drained list and return to the manifest, unless it holds them
        already in some spelling.
    type: str
    choices: [present, drained, undrained]
    default: present
extends_documentation_fragment:
  - ansible.builtin.files
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Computes both files and reports RV(added), RV(removed) and C(changed); writes nothing.
  diff_mode:
    support: full
    details: The manifest's worker URLs and the drained list, before and after.
  platform:
    platforms: posix
    details: Runs on the gateway host (C(delegate_to) it from a serving host's play).
seealso:
  - name: smg's worker options
    description: C(smg launch --help), "--worker-urls"; smg's worker API, C(/workers).
    link: https://pypi.org/project/smg/
"""

EXAMPLES = r"""
- name: The gateway's workers (the sglang_gateway role)
  blackwell.sglang.gateway_manifest:
    path: /var/lib/sglang-gateway/workers.json
    workers: [http://10.0.0.11:30000, http://10.0.0.12:30000]
    owner: root
    group: sglang-gateway
    mode: "0640"

- name: Out of rotation before the restart (the rollout's drain)
  blackwell.sglang.gateway_manifest:
    path: /var/lib/sglang-gateway/workers.json
    workers: [http://10.0.0.11:30000]
    state: drained
  delegate_to: "{{ groups['sglang_gateway'] | first }}"
"""

RETURN = r"""
workers:
  description: The manifest's worker entries after the change (in check mode, what they would be).
  returned: always
  type: list
  elements: dict
  sample: [{"url": "http://10.0.0.12:30000"}]
drained:
  description: The drained worker URLs after the change.
  returned: always
  type: list
  elements: str
  sample: ["http://10.0.0.11:30000"]
added:
  description: URLs this change put in the manifest.
  returned: always
  type: list
  elements: str
removed:
  description: URLs of the manifest entries this change took out (as the manifest spelled them).
  returned: always
  type: list
  elements: str
  sample: ["http://pro6000-01:30000"]
path:
  description: The manifest.
  returned: always
  type: str
"""

import contextlib
import fcntl
import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.blackwell.sglang.plugins.module_utils import gateway


def _read(path, what):
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise gateway.ManifestError("cannot read %s %s: %s" % (what, path, to_native(exc))) from exc
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise gateway.ManifestError("%s %s is not JSON (%s)" % (what, path, exc)) from exc


def _write(module, path, document):
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(document, indent=2) + "\n")
    module.atomic_move(tmp, path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            drained_path=dict(type="path"),
            workers=dict(type="list", elements="str", default=[]),
            state=dict(type="str", choices=list(gateway.MANIFEST_STATES), default="present"),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    path = module.params["path"]
    drained_path = module.params["drained_path"] or os.path.join(os.path.dirname(path), "drained.json")
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        module.fail_json(msg="gateway_manifest: the directory of %s does not exist (the sglang_gateway role makes it)" % path)
    # The lock is released when the process ends or fails (SystemExit leaves the with block).
    with contextlib.ExitStack() as stack:
        if not module.check_mode:
            fcntl.flock(stack.enter_context(open(path + ".lock", "a", encoding="utf-8")), fcntl.LOCK_EX)
        result = _apply(module, path, drained_path, directory)
    module.exit_json(**result)


def _apply(module, path, drained_path, directory):
    try:
        document = _read(path, "the gateway manifest")
        entries = gateway.manifest_workers(document)
        drained = _read(drained_path, "the drained list")
        if drained is not None and (not isinstance(drained, list) or not all(isinstance(url, str) for url in drained)):
            raise gateway.ManifestError("the drained list %s must be a JSON list of URLs, got %r" % (drained_path, drained))
        new, new_drained, added, removed = gateway.edit_manifest(
            entries, drained or [], module.params["workers"], module.params["state"])
    except gateway.ManifestError as exc:
        module.fail_json(msg="gateway_manifest: %s; nothing was changed" % exc)
    new_document = {"version": gateway.MANIFEST_VERSION, "workers": new}
    changed = new_document != document or new_drained != (drained or [])
    if changed and not module.check_mode:
        try:
            if new_document != document:
                _write(module, path, new_document)
            if new_drained != (drained or []):
                _write(module, drained_path, new_drained)
        except OSError as exc:
            module.fail_json(msg="gateway_manifest: cannot write %s: %s" % (directory, to_native(exc)))
    file_args = module.load_file_common_arguments(module.params)
    if os.path.exists(path):
        changed = module.set_fs_attributes_if_different(file_args, changed)
    if os.path.exists(drained_path):
        file_args["path"] = drained_path
        changed = module.set_fs_attributes_if_different(file_args, changed)
    return dict(
        changed=changed, path=path, workers=new, drained=new_drained, added=added, removed=removed,
        diff={"before": {"workers": [entry["url"] for entry in entries], "drained": drained or []},
              "after": {"workers": [entry["url"] for entry in new], "drained": new_drained}})


if __name__ == "__main__":
    main()

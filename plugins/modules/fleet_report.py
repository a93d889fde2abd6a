#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_report
short_description: Write the fleet report (JSON and a Markdown table) on the controller
version_added: 0.1.0
author: blackwell.sglang developers (!UNKNOWN)
description:
  - Writes one row per host (O(hosts) and their O(rows)) as a JSON document and a Markdown table in
    O(dir) on the controller, C(fleet-<run_id>.json) and C(.md) for this run and C(fleet-latest.json)
    and C(.md), the latest run's. Each file is replaced atomically (mode C(0644)); the directory is
    made when missing (mode C(0755)). A run that writes again (the rollout, after every batch)
    replaces its own files.
  - An action that runs on the controller only (no connection to the host); run it once
    with C(run_once). The report is the run's output, not a host's state, so it never reports a change.
  - Rows are the C(rollout_report_row) facts that the rollout role sets (C(roles/rollout/tasks/report_row.yml)) from
    what the roles published (M(blackwell.sglang.nvidia_gpu_info) through C(sglang_node_gpus),
    C(cuda_toolkit), C(flashinfer), C(sglang_venv), C(sglang_services)) and the rollout's own facts
    (batch, seconds, result). A host without a row (it failed or was unreachable before) gets an
    empty row whose result is C(not reached).
  - Fails, writing nothing more, when the directory or a file cannot be written (a read-only or
    missing parent, a file in its place, permissions), naming the directory and the OS error.
options:
  dir:
    description: The report directory on the controller (the rollout's C(rollout_report_dir)).
    type: path
    required: true
  run_id:
    description:
      - The run's id in the file names and the title; the rollout sets one per run (UTC,
        C(%Y%m%dT%H%M%SZ)) so that every batch rewrites the same files.
      - Default, the current UTC time in that format.
    type: str
  title:
    description: The Markdown table's title (the run id is added in brackets) and the JSON's C(play).
    type: str
    default: Fleet report
  hosts:
    description: The hosts of the report, in its order (for a play, C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
  rows:
    description:
      - Each host's row, in the order of O(hosts) (C({}) for a host without one); empty, every host
        is C(not reached).
    type: list
    elements: raw
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Builds the report and returns it; writes nothing (RV(written) is false).
  diff_mode:
    support: none
  platform:
    platforms: posix
    details: Runs on the controller.
"""

EXAMPLES = r"""
- name: Each host's row (the fact rollout_report_row)
  ansible.builtin.set_fact:
    rollout_report_row: "{{ inventory_hostname | blackwell.sglang.fleet_report_row({'result': 'ok', 'batch': 1}) }}"

- name: The fleet, in ~/.cache/blackwell-sglang/reports
  blackwell.sglang.fleet_report:
    dir: "{{ rollout_report_dir }}"
    title: "{{ ansible_play_name }}"
    hosts: "{{ ansible_play_hosts_all }}"
    rows: "{{ ansible_play_hosts_all | map('extract', hostvars) | map(attribute='rollout_report_row', default={}) | list }}"
  run_once: true
  register: fleet

- name: Print it
  ansible.builtin.debug:
    msg: "{{ fleet.markdown.splitlines() }}"
  run_once: true
"""

RETURN = r"""
run_id:
  description: The run id used in the file names.
  returned: success
  type: str
  sample: 20261201T160402Z
files:
  description: The files written (or, in check mode, that would be), this run's and the latest.
  returned: success
  type: list
  elements: path
  sample:
    - /root/.cache/blackwell-sglang/reports/fleet-20261201T160402Z.json
    - /root/.cache/blackwell-sglang/reports/fleet-20261201T160402Z.md
    - /root/.cache/blackwell-sglang/reports/fleet-latest.json
    - /root/.cache/blackwell-sglang/reports/fleet-latest.md
written:
  description: Whether the files were written (false in check mode).
  returned: success
  type: bool
report:
  description:
    - The rows, one per host, as in the JSON file's C(rows) (host, group, gpus, driver, cuda, flashinfer,
      venv_before, venv_staged, venv_now, venv, sglang, cache, service, health, batch, seconds in
      seconds, result, reason).
  returned: success
  type: list
  elements: dict
markdown:
  description: The Markdown table, as in the C(.md) files.
  returned: success
  type: str
"""

# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_services
short_description: The SGLang services this collection manages, with their units and labels
version_added: "0.1.0"
author: blackwell.sglang developers (!UNKNOWN)
description:
  - Returns one dictionary per service the C(sglang_services) role manages, in the order the role
    handles them - C(eagle3), C(autoregressive), C(dflash).
  - The list lives once, in the collection's C(plugins/module_utils/sglang_services.py); the role's
    filters and unit template read the same list.
  - Takes no terms.
"""

EXAMPLES = r"""
- name: Every SGLang unit on the host
  ansible.builtin.debug:
    msg: "{{ query('blackwell.sglang.sglang_services') | map(attribute='unit') | list }}"
"""

RETURN = r"""
_list:
  description: One dictionary per service.
  type: list
  elements: dict
  contains:
    name:
      description: The service's name, as in C(sglang_services_active) and C(sglang_services_<name>).
      type: str
      sample: eagle3
    unit:
      description: Its systemd unit.
      type: str
      sample: sglang-eagle3.service
    label:
      description: What the unit's C(Description=) calls it.
      type: str
      sample: EAGLE-3 speculative decoding
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_services import SERVICES, unit_name


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if terms:
            raise AnsibleLookupError("blackwell.sglang.sglang_services takes no terms, got %r" % (terms,))
        return [{"name": name, "unit": unit_name(name), "label": label} for name, label in SERVICES.items()]

#!/usr/bin/env bash
# The main job against the local lab: bootstrap, create the lab containers (the serving nodes and
# the gateway node), run site.yml, print where clients reach the gateway.
#   ./scripts/lab.sh [extra ansible-playbook args, e.g. --check or --diff]
#   ./scripts/lab.sh --remove     remove the lab's nodes (about 11.5 GB of disk each) and say what that freed
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$BSG_ROOT/scripts/bootstrap.sh"
cd "$BSG_ROOT"
if [ "${1:-}" = "--remove" ]; then
  before="$(python scripts/disk.py free)"
  ansible-playbook -i inventories/lab playbooks/lab.yml -e lab_state=absent
  awk -v a="$(python scripts/disk.py free)" -v b="$before" 'BEGIN { printf "lab.sh: the lab'"'"'s nodes are gone; %.1f GB freed, %.1f GB free now\n", (a - b) / 1e9, a / 1e9 }'
  exit 0
fi
ansible-playbook -i inventories/lab playbooks/lab.yml
ansible-playbook -i inventories/lab site.yml "$@"
# Where clients reach the lab's gateway: its container's address on podman's network (the port and
# the key from the inventory). The lab's nodes have no GPU, so their servers do not start: the
# gateway registers a worker once it answers, and until then has none to send requests to.
ansible-inventory -i inventories/lab --list | python -c '
import json, subprocess, sys
inventory = json.load(sys.stdin)
for host in inventory.get("sglang_gateway", {}).get("hosts", []):
    hostvars = inventory["_meta"]["hostvars"][host]
    container = json.loads(subprocess.check_output(["podman", "container", "inspect", hostvars.get("ansible_host", host)]))
    print("lab.sh: clients reach the gateway %s at http://%s:%s (SGLang native POST /generate, OpenAI /v1/*;"
          " the key: sglang_gateway_api_key in inventories/lab/group_vars/sglang_gateway.yml)"
          % (host, container[0]["NetworkSettings"]["IPAddress"], hostvars.get("sglang_gateway_port", 30080)))
'

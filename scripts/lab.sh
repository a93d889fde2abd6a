#!/usr/bin/env bash
# The main job against the local lab: bootstrap, create the lab containers, run site.yml.
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

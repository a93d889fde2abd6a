#!/usr/bin/env bash
# The main job against the local lab: bootstrap, create the lab containers, run site.yml.
#   ./scripts/lab.sh [extra ansible-playbook args, e.g. --check or --diff]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$BSG_ROOT/scripts/bootstrap.sh"
cd "$BSG_ROOT"
ansible-playbook -i inventories/lab playbooks/lab.yml
ansible-playbook -i inventories/lab site.yml "$@"

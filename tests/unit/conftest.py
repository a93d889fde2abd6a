"""Make `ansible_collections.blackwell.sglang` importable from this checkout."""

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "blackwell", "sglang")
if not os.path.exists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(os.path.relpath(ROOT, os.path.dirname(LINK)), LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

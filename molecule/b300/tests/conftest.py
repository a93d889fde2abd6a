"""The B300 scenario's tests use molecule/default/tests/conftest.py: one home for the helpers that
run playbooks against a scenario's node as an operator would. It is loaded from there and its
names (fixtures included) are this conftest's; each test file names its node (testinfra_hosts).
"""

import importlib.util
import os

_SPEC = importlib.util.spec_from_file_location(
    "default_conftest", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "default", "tests", "conftest.py"))
_DEFAULT = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_DEFAULT)
globals().update({name: value for name, value in vars(_DEFAULT).items() if not name.startswith("__")})

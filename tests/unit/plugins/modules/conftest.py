"""The `fake` fixture: the fake FlashInfer of fake_flashinfer.py on sys.path, a clean environment."""

import os

import pytest

from fake_flashinfer import ENV_NAMES, FakeFlashInfer, drop_flashinfer_modules


@pytest.fixture
def fake(tmp_path, monkeypatch):
    saved = dict(os.environ)
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    drop_flashinfer_modules()
    yield FakeFlashInfer(tmp_path, monkeypatch)
    drop_flashinfer_modules()
    # The module writes os.environ directly (env_file, workspace_base, jobs): put it back.
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(autouse=True)
def module_process(monkeypatch):
    """A module runs in a process of its own on the host, where ansible-core's controller code is not
    loaded. Once a test in this process has imported controller code (a filter plugin imports
    ansible.errors), ansible-core 2.19 sends module warnings to the controller's display instead of
    the result; put the module's view back (ansible.module_utils._internal.is_controller)."""
    from ansible.module_utils import _internal
    monkeypatch.setattr(_internal, "is_controller", False)

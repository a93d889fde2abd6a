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

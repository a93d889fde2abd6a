# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Package index settings -> the arguments pip and uv take for them (one home for the common role's
installer, its uv download and the controller wheelhouses)."""

from __future__ import annotations


def index_args(index_url, extra_index_urls=None):
    """('https://mirror/simple', ['https://x/simple']) ->
    ['--index-url', 'https://mirror/simple', '--extra-index-url', 'https://x/simple'].

    An empty `index_url` leaves pip's and uv's default (PyPI); each extra URL adds one pair. Both
    tools take these spellings. TypeError for anything but a string and a list."""
    if extra_index_urls is None:
        extra_index_urls = []
    if not isinstance(index_url, str) or not isinstance(extra_index_urls, (list, tuple)):
        raise TypeError(
            "pip_index_args wants an index URL string and a list of extra URLs, got %r and %r"
            % (index_url, extra_index_urls))
    args = ["--index-url", index_url] if index_url else []
    for url in extra_index_urls:
        args += ["--extra-index-url", str(url)]
    return args

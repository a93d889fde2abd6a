# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A local stand-in for the get-pip.py that ansible-test downloads from ci-files.testing.ansible.com.

ansible-test bootstraps pip into each empty venv it makes for a sanity test by running
``~/.ansible/test/cache/get_pip_<version>.py`` (it downloads the script only when that file is
missing), as ``python get_pip_<version>.py [pip options] pip==<version> [--no-setuptools] [--no-wheel]``.
Hosts that reach PyPI only through a proxy cannot download it. scripts/sanity.sh puts this file
there under that name, and the wheel of exactly that pip beside it (downloaded from the package
index by the controller's pip, which trusts the proxy's CA). This script installs the requested
packages with pip run from that wheel, from that directory only: no network.
"""

import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# get-pip.py options that are not pip options.
GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")


def main(argv):
    wheels = sorted(glob.glob(os.path.join(HERE, "pip-*.whl")))
    if not wheels:
        sys.stderr.write("get_pip stand-in: no pip wheel in %s; run scripts/sanity.sh\n" % HERE)
        return 1
    sys.path.insert(0, wheels[-1])
    from pip._internal.cli.main import main as pip_main

    args = [arg for arg in argv if arg not in GET_PIP_ONLY]
    return pip_main(["install", "--no-index", "--find-links", HERE] + args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

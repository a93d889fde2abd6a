# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse each service's launch_server arguments with the installed SGLang's own CLI parser.

Usage: <venv>/bin/python validate_args.py '{"eagle3": ["--model-path", ...], ...}'

Builds SGLang's parser (ServerArgs.add_cli_args) and parses every argument list with it, as
`python -m sglang.launch_server` would, without touching a GPU. Also resolves
--speculative-algorithm with SGLang's own SpeculativeAlgorithm.from_string. Prints one JSON line
({"sglang": version, "services": {name: n_args}}) and exits 0, or prints "<service>: <SGLang's
message>" per bad service on stderr and exits 1.
"""

import argparse
import json
import sys


class ParseError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ParseError(message)


def main(argv):
    services = json.loads(argv[1])
    try:
        import sglang
        from sglang.srt.server_args import ServerArgs
    except ImportError as exc:
        sys.stderr.write("cannot import SGLang's server arguments (%s); run with the SGLang venv's python\n" % exc)
        return 1
    try:
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    except ImportError:  # older layout: argparse alone decides
        SpeculativeAlgorithm = None
    errors = []
    counts = {}
    for name, args in sorted(services.items()):
        parser = Parser(prog="sglang-%s (python -m sglang.launch_server)" % name)
        ServerArgs.add_cli_args(parser)
        try:
            namespace = parser.parse_args(args)
            algorithm = getattr(namespace, "speculative_algorithm", None)
            if SpeculativeAlgorithm is not None and algorithm:
                try:
                    SpeculativeAlgorithm.from_string(algorithm)
                except (KeyError, ValueError) as exc:
                    raise ParseError("--speculative-algorithm %s: %s" % (algorithm, exc))
        except ParseError as exc:
            errors.append("sglang-%s: %s" % (name, exc))
            continue
        counts[name] = len(args)
    if errors:
        sys.stderr.write("SGLang %s rejects the arguments: %s\n" % (sglang.__version__, "; ".join(errors)))
        return 1
    print(json.dumps({"sglang": sglang.__version__, "services": counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse each service's launch_server arguments with the installed SGLang's own CLI parser.

Usage: <venv>/bin/python validate_args.py '{"eagle3": ["--model-path", ...], ...}'

Builds SGLang's parser (ServerArgs.add_cli_args) and parses every argument list with it, as
`python -m sglang.launch_server` would, without touching a GPU. Also resolves
--speculative-algorithm with SGLang's own SpeculativeAlgorithm.from_string. Prints one JSON line
({"sglang": version, "services": {name: n_args}}) and exits 0, or prints "<service>: <SGLang's
message>" per bad service on stderr and exits 1. Whatever else fails (no or bad JSON argument, an
SGLang that cannot be imported) is one line on stderr, exit 2 for a usage error, 1 otherwise.
"""

import argparse
import json
import sys


class ParseError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ParseError(message)


def one_line(exc):
    return " ".join(str(exc).split())


USAGE = "usage: validate_args.py '{\"<service>\": [\"--flag\", \"value\", ...], ...}'"


def read_services(argv):
    """The one argument: a JSON object of service name -> list of argument strings."""
    if len(argv) != 2:
        raise ValueError("expected one JSON argument, got %d" % (len(argv) - 1))
    try:
        services = json.loads(argv[1])
    except ValueError as exc:
        raise ValueError("the argument is not JSON (%s)" % exc)
    if not isinstance(services, dict) or not all(
            isinstance(args, list) and all(isinstance(arg, str) for arg in args) for args in services.values()):
        raise ValueError("the argument must be a JSON object of service name -> list of strings")
    return services


def main(argv):
    try:
        services = read_services(argv)
    except ValueError as exc:
        sys.stderr.write("validate_args.py: %s; %s (the sglang_services role passes it)\n" % (exc, USAGE))
        return 2
    try:
        import sglang
        from sglang.srt.server_args import ServerArgs
    except ImportError as exc:
        sys.stderr.write("cannot import SGLang's server arguments (%s); run with the SGLang venv's python\n" % exc)
        return 1
    except (OSError, RuntimeError) as exc:  # torch or a CUDA library it loads while SGLang imports
        sys.stderr.write("cannot import SGLang's server arguments (%s: %s): reinstall the venv (re-run site.yml)\n"
                         % (type(exc).__name__, one_line(exc)))
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


def run(argv):
    """main() with one line, not a traceback, for what it does not expect either."""
    try:
        return main(argv)
    except Exception as exc:  # one line for the operator, not a traceback
        sys.stderr.write("validate_args.py: unexpected %s: %s\n" % (type(exc).__name__, one_line(exc)))
        return 1


if __name__ == "__main__":
    sys.exit(run(sys.argv))

"""Test double, fleet scenario only: stands in for what cannot run on a lab node without a GPU.

  standin.py server --port N   replaces an SGLang server (the scenario's prepare puts it in the units'
                               ExecStart= through a systemd drop-in; ExecStartPre=, the FlashInfer
                               pre-warm check, stays real). It answers what the collection calls on a
                               server: GET /health_generate, POST /generate, GET /v1/loads. It reports
                               the venv it was started from (its interpreter's real sys.prefix) and
                               appends "start <venv id>" to /var/lib/sglang/standin-starts.log.
                               A venv id listed in /etc/sglang/standin-fail makes it unhealthy (503).
  standin.py router --port N --log FILE
                               replaces an SGLang router (model gateway)'s worker API: GET /workers,
                               POST /workers {"url"}, DELETE /workers/{id}; every call is appended to
                               FILE as one JSON line. Runs on the controller (the tests start it).
"""

import argparse
import json
import os
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VENV = os.path.realpath(sys.prefix)
VENV_ID = os.path.basename(VENV)


def failing():
    try:
        with open("/etc/sglang/standin-fail", encoding="utf-8") as handle:
            return VENV_ID in handle.read().split()
    except OSError:
        return False


class JsonHandler(BaseHTTPRequestHandler):
    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Server(JsonHandler):

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path.startswith("/health_generate"):
            self.reply(503 if self.server.failing else 200, {"venv": VENV})
        elif self.path.startswith("/v1/loads"):
            self.reply(200, {"loads": [{"dp_rank": 0, "num_running_reqs": 0, "num_waiting_reqs": 0}]})
        elif self.path.startswith("/server_info"):
            self.reply(200, {"venv": VENV, "stand_in": True})
        else:
            self.reply(404, {"error": self.path})

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        if self.path.startswith("/generate") and not self.server.failing:
            self.reply(200, {"text": " Paris (stand-in, venv %s)" % VENV_ID, "prompt": request.get("text")})
        else:
            self.reply(503 if self.server.failing else 404, {"error": self.path})


class Router(JsonHandler):
    def log_call(self, entry):
        with open(self.server.log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(dict(entry, time=time.time())) + "\n")

    def do_GET(self):  # noqa: N802
        workers = list(self.server.workers.values())
        self.reply(200, {"workers": workers, "total": len(workers)})

    def do_POST(self):  # noqa: N802
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        worker = {"id": str(uuid.uuid4()), "url": request["url"], "worker_type": "regular"}
        self.server.workers[worker["id"]] = worker
        self.log_call({"call": "add", "url": request["url"]})
        self.reply(202, {"status": "accepted", "worker_id": worker["id"]})

    def do_DELETE(self):  # noqa: N802
        worker = self.server.workers.pop(self.path.rsplit("/", 1)[-1], None)
        self.log_call({"call": "remove", "url": worker and worker["url"]})
        self.reply(202 if worker else 404, {"status": "accepted" if worker else "unknown worker"})

    def log_message(self, *args):  # quiet
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["server", "router"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--log")
    parser.add_argument("--worker", action="append", default=[], help="router: a worker URL known at start")
    args = parser.parse_args()
    if args.mode == "server":
        httpd = ThreadingHTTPServer((args.host, args.port), Server)
        httpd.failing = failing()
        with open("/var/lib/sglang/standin-starts.log", "a", encoding="utf-8") as handle:
            handle.write("start %s %d\n" % (VENV_ID, time.time()))
    else:
        httpd = ThreadingHTTPServer((args.host, args.port), Router)
        httpd.log = args.log
        httpd.workers = {}
        for url in args.worker:
            httpd.workers[str(uuid.uuid4())] = {"id": None, "url": url}
        for key, worker in httpd.workers.items():
            worker["id"] = key
    httpd.serve_forever()


if __name__ == "__main__":
    main()

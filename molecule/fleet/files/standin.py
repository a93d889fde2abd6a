"""Test double for an SGLang server (the fleet scenario and the unit tests against the real model
gateway): a lab node has no GPU and no weights, so the real server cannot start there. It is not
a model server; it answers what the collection and the gateway ask a server, as SGLang does:

  - GET /health, /health_generate (200, 503 when failing; never behind the API key: SGLang's
    add_api_key_middleware, sglang/srt/utils/common.py, lets /health* and /metrics* through);
  - what smg 1.13.0 probes before and after it registers a worker (seen in the gateway's calls):
    /server_info and /get_server_info (model_path, served_model_name, tp_size, dp_size, version),
    /model_info and /get_model_info, /v1/models, /v1/loads?include=... and /loads, whose figures
    are this process's own requests in flight (num_running_reqs per DP rank, as SGLang's
    sglang/srt/entrypoints/v1_loads.py reports them);
  - POST /generate (SGLang's native {"text": ...}) and /v1/completions, /v1/chat/completions
    (OpenAI's shape), each answered after the configured delay, so requests are in flight during a
    drain. /generate with "stream": true answers as SGLang's does (sglang/srt/entrypoints/http_server.py
    generate_request: "data: {json}" events, the last "data: [DONE]"), its chunks spread over the
    delay, so a server stopped mid-stream leaves a stream without its final chunk. Request bodies
    are read with Content-Length or chunked (the gateway forwards some bodies chunked).

  standin.py server --port N [--host H] [--dp-size N] [--state-dir D] [--config F]

The test knobs, read on every request from --config (default /etc/sglang/standin.json, JSON):
"delay" (seconds each generation takes), "api_key" (requests other than /health* need
"Authorization: Bearer <key>", else 401 {"error": "Unauthorized"}, as SGLang's --api-key), "loads"
("error": /v1/loads answers 500, "garbage": 200 with a body that is not a load report). A venv id
listed in /etc/sglang/standin-fail when it starts makes it unhealthy (503) and its generations fail,
as does STANDIN_UNHEALTHY=1 in its environment (a change of the service's env file that breaks it).
It appends "start <venv id> <time>" to <state-dir>/standin-starts.log and reports the venv it was
started from (its interpreter's real sys.prefix) in /server_info.
"""

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VENV = os.path.realpath(sys.prefix)
VENV_ID = os.path.basename(VENV)
MODEL = "/models/standin"


def failing(path="/etc/sglang/standin-fail"):
    try:
        with open(path, encoding="utf-8") as handle:
            return VENV_ID in handle.read().split()
    except OSError:
        return False


class Server(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the gateway's connection pool expects

    def knobs(self):
        try:
            with open(self.server.config, encoding="utf-8") as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return {}

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def allowed(self, path, knobs):
        key = knobs.get("api_key")
        if not key or path.startswith("/health") or self.headers.get("Authorization") == "Bearer " + key:
            return True
        self.reply(401, {"error": "Unauthorized"})
        return False

    def do_GET(self):  # noqa: N802 (http.server's name)
        path = self.path.split("?", 1)[0]
        knobs = self.knobs()
        if not self.allowed(path, knobs):
            return
        dp_size = self.server.dp_size
        if path in ("/health", "/health_generate"):
            self.reply(503 if self.server.failing else 200, {"venv": VENV})
        elif path in ("/server_info", "/get_server_info"):
            self.reply(200, {"model_path": MODEL, "served_model_name": "standin", "tp_size": 1, "dp_size": dp_size,
                             "version": "0.5.23", "venv": VENV, "stand_in": True})
        elif path in ("/model_info", "/get_model_info"):
            self.reply(200, {"model_path": MODEL, "tokenizer_path": MODEL, "is_generation": True})
        elif path == "/v1/models":
            self.reply(200, {"object": "list", "data": [{"id": "standin", "object": "model", "owned_by": "stand-in"}]})
        elif path in ("/v1/loads", "/loads"):
            if knobs.get("loads") == "error":
                self.reply(500, {"error": "stand-in told to fail /v1/loads"})
            elif knobs.get("loads") == "garbage":
                self.reply(200, {"unexpected": True})
            else:
                running = self.server.in_flight
                # The requests in flight on rank 0; SGLang reports one entry per DP rank.
                self.reply(200, {"loads": [{"dp_rank": rank, "num_running_reqs": running if rank == 0 else 0,
                                            "num_waiting_reqs": 0} for rank in range(dp_size)]})
        else:
            self.reply(404, {"error": "not served by the stand-in: %s" % path})

    def body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()  # the chunk's CRLF
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def stream(self, text, delay, chunks=4):
        """SGLang's native streaming answer: cumulative "text" per event, then [DONE]."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for index in range(chunks):
            time.sleep(delay / chunks)
            done = index == chunks - 1
            event = {"text": text[:len(text) * (index + 1) // chunks], "meta_info": {
                "id": "standin", "finish_reason": {"type": "stop"} if done else None}}
            self.chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
        self.chunk(b"data: [DONE]\n\n")
        self.chunk(b"")

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_POST(self):  # noqa: N802
        path = self.path.split("?", 1)[0]
        request = json.loads(self.body() or b"{}")
        knobs = self.knobs()
        if not self.allowed(path, knobs):
            return
        if path not in ("/generate", "/v1/completions", "/v1/chat/completions"):
            self.reply(404, {"error": "not served by the stand-in: %s" % path})
            return
        with self.server.lock:
            self.server.in_flight += 1
        try:
            delay = float(knobs.get("delay") or 0)
            text = " Paris (stand-in, venv %s)" % VENV_ID
            if path == "/generate" and request.get("stream") and not self.server.failing:
                self.stream(text, delay)
                return
            time.sleep(delay)
            if self.server.failing:
                self.reply(503, {"error": "stand-in told to fail for venv %s" % VENV_ID})
                return
            if path == "/generate":
                self.reply(200, {"text": text, "prompt": request.get("text"),
                                 "meta_info": {"id": "standin", "finish_reason": {"type": "stop"}}})
            elif path == "/v1/completions":
                self.reply(200, {"id": "standin", "object": "text_completion", "model": "standin",
                                 "choices": [{"index": 0, "text": text, "finish_reason": "stop"}]})
            else:
                self.reply(200, {"id": "standin", "object": "chat.completion", "model": "standin",
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                              "finish_reason": "stop"}]})
        finally:
            with self.server.lock:
                self.server.in_flight -= 1

    def log_message(self, *args):  # quiet
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["server"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--dp-size", type=int, default=1)
    parser.add_argument("--state-dir", default="/var/lib/sglang")
    parser.add_argument("--config", default="/etc/sglang/standin.json")
    args = parser.parse_args()
    httpd = ThreadingHTTPServer((args.host, args.port), Server)
    httpd.daemon_threads = True
    httpd.failing = failing() or os.environ.get("STANDIN_UNHEALTHY") == "1"
    httpd.dp_size = args.dp_size
    httpd.config = args.config
    httpd.in_flight = 0
    httpd.lock = threading.Lock()
    with open(os.path.join(args.state_dir, "standin-starts.log"), "a", encoding="utf-8") as handle:
        handle.write("start %s %d\n" % (VENV_ID, time.time()))
    httpd.serve_forever()


if __name__ == "__main__":
    main()

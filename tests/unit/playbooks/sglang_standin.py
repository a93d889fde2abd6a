"""Stand-in for an SGLang server, for tests against the real model gateway (PyPI `smg`): a real
SGLang server needs a GPU and weights. It answers what smg 1.13.0 asks a worker before and after it
registers it (seen in this stand-in's log: /health, /server_info then /get_server_info, /model_info
then /get_model_info, /v1/models, /v1/loads?include=..., /loads), with the fields SGLang's
/get_server_info has that the gateway reads (dp_size: a --dp-aware gateway holds one entry per
rank). Nothing else; not a model server.

  python sglang_standin.py PORT [DP_SIZE]
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])
DP_SIZE = int(sys.argv[2]) if len(sys.argv) > 2 else 1
MODEL = "/models/standin"


class Handler(BaseHTTPRequestHandler):
    def _json(self, code, document):
        body = json.dumps(document).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (http.server's name)
        path = self.path.split("?", 1)[0]
        if path in ("/health", "/health_generate"):
            return self._json(200, {})
        if path in ("/server_info", "/get_server_info"):
            return self._json(200, {"model_path": MODEL, "served_model_name": "standin", "tp_size": 1,
                                    "dp_size": DP_SIZE, "version": "0.5.23"})
        if path in ("/model_info", "/get_model_info"):
            return self._json(200, {"model_path": MODEL, "tokenizer_path": MODEL, "is_generation": True})
        if path == "/v1/models":
            return self._json(200, {"object": "list", "data": [{"id": "standin", "object": "model"}]})
        if path in ("/v1/loads", "/loads"):
            return self._json(200, {"loads": [{"dp_rank": rank, "num_running_reqs": 0, "num_waiting_reqs": 0}
                                              for rank in range(DP_SIZE)]})
        return self._json(404, {"error": "not served by the stand-in: %s" % path})

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()

# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A bounded load of real requests through the SGLang model gateway, and what became of each.

Usage:
  python scripts/loadgen.py URL [--concurrency 8] [--duration 60] [--stream-share 0.5]
        [--timeout 60] [--json FILE]
  SGLANG_GATEWAY_API_KEY=... python scripts/loadgen.py http://gateway-01:30080 --duration 120

Each of CONCURRENCY clients sends SGLang's native POST /generate ({"text", "sampling_params"}; no
"model", as SGLang's own clients) one after another until DURATION seconds have passed, then stops
by itself; a share of them (--stream-share) with "stream": true. The key, if any, comes from the
environment (SGLANG_GATEWAY_API_KEY), never from the command line. It prints the total, the failed
requests by class and p50/p99 latency of the served ones (seconds), and exits 1 when any failed.

A request counts as served only when its answer is whole:
  - status: the gateway answered something other than 200;
  - connection: no answer (refused, reset, timed out before the status line);
  - cut short: a 200 whose body is not a whole answer - a plain answer that is not JSON with
    "text" and a finish reason, or whose finish reason is "abort"; a stream that does not end with
    "data: [DONE]" after an event whose meta_info.finish_reason is set and is not "abort", or that
    carries an {"error"} event (sglang/srt/entrypoints/http_server.py, generate_request; SGLang ends
    a request cut by an abort or a shutdown with finish_reason {"type": "abort"}). A worker stopped
    mid-stream can end the stream cleanly with status 200, so this is the class that a status code
    alone would hide;
  - error: anything else that went wrong in the client (counted, never lost).

Bounds (a wrong value exits 2 before any request): 1 <= concurrency <= 256, 1 <= duration <= 600 s,
0 <= stream share <= 1, 1 <= timeout <= 600 s. Used by tests/unit/playbooks/test_rollout_under_load.py
(import: Load) and by hand.
"""

import argparse
import http.client
import json
import math
import os
import sys
import threading
import time
import urllib.parse

MAX_CONCURRENCY = 256
MAX_DURATION = 600
CLASSES = ("status", "connection", "cut short", "error")


def problems(concurrency, duration, stream_share=0.5, timeout=60):
    """Sentences for each setting out of its bounds ([] when all are good)."""
    found = []
    checks = (("concurrency", concurrency, 1, MAX_CONCURRENCY, int), ("duration", duration, 1, MAX_DURATION, (int, float)),
              ("stream share", stream_share, 0, 1, (int, float)), ("timeout", timeout, 1, 600, (int, float)))
    for name, value, low, high, kinds in checks:
        if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
            found.append("%s must be %s between %s and %s, got %r" % (
                name, "a whole number" if kinds is int else "a number", low, high, value))
    return found


def percentile(values, share):
    """The value below which `share` of `values` lie (nearest rank); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def finish_problem(answer):
    """Why an answer's (or last event's) finish reason says it is not whole ('' when it is whole)."""
    reason = (answer.get("meta_info") or {}).get("finish_reason") if isinstance(answer, dict) else None
    if not reason:
        return "no finish reason"
    kind = reason.get("type") if isinstance(reason, dict) else reason
    return "finish reason %r" % kind if kind == "abort" else ""


def whole_stream(lines):
    """Why a streamed answer is not whole ('' when it is): the last event is [DONE], every other
    parses, none is an error, and the last before [DONE] carries a finish reason that is not abort."""
    events = [line[len(b"data:"):].strip() for line in lines if line.startswith(b"data:")]
    if not events or events[-1] != b"[DONE]":
        return "the stream ended without its final chunk (%d events)" % len(events)
    try:
        parsed = [json.loads(event) for event in events[:-1]]
    except ValueError:
        return "an event of the stream is not JSON"
    if any(isinstance(event, dict) and "error" in event for event in parsed):
        return "the stream carries an error event"
    if not parsed:
        return "no event before [DONE]"
    why = finish_problem(parsed[-1])
    return "the stream's last event has %s" % why if why else ""


class Load:
    """CONCURRENCY clients sending requests through the gateway at URL until stop() or DURATION."""

    def __init__(self, url, concurrency=8, duration=60, stream_share=0.5, key="", timeout=60,
                 prompt="The capital of France is"):
        bad = problems(concurrency, duration, stream_share, timeout)
        if bad:
            raise ValueError("loadgen: " + "; ".join(bad))
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError("loadgen: the gateway URL must be http://host[:port], got %r" % url)
        self.host, self.port = parts.hostname, parts.port or 80
        self.concurrency, self.duration, self.stream_share = concurrency, duration, stream_share
        self.key, self.timeout, self.prompt = key, timeout, prompt
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.latencies = []
        self.failed = {name: 0 for name in CLASSES}
        self.examples = {}
        self.sent = self.streamed = 0
        self.threads = []
        self.started = self.ended = None

    def start(self):
        self.started = time.monotonic()
        self.threads = [threading.Thread(target=self.client, args=(index,), daemon=True) for index in range(self.concurrency)]
        for thread in self.threads:
            thread.start()
        return self

    def stop(self):
        """Stop sending; wait for the requests in flight (each bounded by the timeout)."""
        self.done.set()
        for thread in self.threads:
            thread.join(self.timeout + 5)
        with self.lock:
            self.ended = self.ended or time.monotonic()
        return self.report()

    def wait(self):
        """Until DURATION has passed (the clients stop by themselves, each request bounded by the
        timeout), then the report."""
        for thread in self.threads:
            thread.join(self.duration + self.timeout + 5)
        return self.stop()

    def client(self, index):
        number = 0
        while not self.done.is_set() and time.monotonic() - self.started < self.duration:
            # Deterministic mix: of every client's requests, the share streamed.
            turn = index + number
            stream = int((turn + 1) * self.stream_share) > int(turn * self.stream_share)
            number += 1
            began = time.monotonic()
            try:
                failure = self.request(stream, index)
            except Exception as exc:  # pylint: disable=broad-exception-caught  # counted, never lost
                failure = ("error", "%s: %s" % (type(exc).__name__, exc))
            with self.lock:
                self.sent += 1
                self.streamed += int(stream)
                if not failure:
                    self.latencies.append(time.monotonic() - began)
                else:
                    kind, why = failure
                    self.failed[kind] += 1
                    self.examples.setdefault(kind, why)
            if failure:
                time.sleep(0.05)  # a gateway that refuses is not hammered

    def request(self, stream, index):
        """None when the answer is whole, else (class, why)."""
        body = {"text": "%s (client %d)" % (self.prompt, index),
                "sampling_params": {"max_new_tokens": 8, "temperature": 0}}
        if stream:
            body["stream"] = True
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = "Bearer " + self.key
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            try:
                connection.request("POST", "/generate", json.dumps(body).encode(), headers)
                response = connection.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                return "connection", "%s: %s" % (type(exc).__name__, exc)
            try:
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:  # the body broke off
                if response.status != 200:
                    return "status", "HTTP %d (its body broke off)" % response.status
                return "cut short", "%s %s: %s" % ("stream" if stream else "answer", type(exc).__name__, exc)
            if response.status != 200:
                return "status", "HTTP %d: %s" % (response.status, data[:200].decode("utf-8", "replace"))
            if stream:
                why = whole_stream(data.splitlines())
                return ("cut short", why) if why else None
            try:
                answer = json.loads(data)
            except ValueError:
                return "cut short", "the answer is not JSON: %r" % data[:100]
            if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
                return "cut short", "the answer has no text: %r" % data[:100]
            why = finish_problem(answer)
            return ("cut short", "the answer has %s" % why) if why else None
        finally:
            connection.close()

    def report(self):
        with self.lock:
            failed = sum(self.failed.values())
            return {"total": self.sent, "served": self.sent - failed, "failed": failed,
                    "failed_by_class": dict(self.failed), "examples": dict(self.examples), "streamed": self.streamed,
                    "p50_s": percentile(self.latencies, 0.50), "p99_s": percentile(self.latencies, 0.99),
                    "seconds": round((self.ended or time.monotonic()) - (self.started or time.monotonic()), 1),
                    "concurrency": self.concurrency}


def describe(report):
    """The report in one line of figures."""
    latency = ("p50 %.3f s, p99 %.3f s" % (report["p50_s"], report["p99_s"])) if report["p50_s"] is not None else "no latency"
    classes = ", ".join("%s %d" % (name, count) for name, count in report["failed_by_class"].items() if count) or "none"
    return "%d requests (%d streamed) in %.1f s from %d clients: %d failed (%s); %s" % (
        report["total"], report["streamed"], report["seconds"], report["concurrency"], report["failed"], classes, latency)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("url")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--duration", type=float, default=60)
    parser.add_argument("--stream-share", type=float, default=0.5)
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--json", help="also write the report to this file")
    args = parser.parse_args(argv)
    try:
        load = Load(args.url.rstrip("/"), args.concurrency, args.duration, args.stream_share,
                    os.environ.get("SGLANG_GATEWAY_API_KEY", ""), args.timeout)
    except ValueError as exc:
        sys.stderr.write("%s\n" % exc)
        return 2
    report = load.start().wait()
    print(describe(report))
    for kind, why in report["examples"].items():
        print("  first %s failure: %s" % (kind, why))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2, sort_keys=True)
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())

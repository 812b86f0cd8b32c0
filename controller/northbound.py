"""Northbound API for reconfiguration studies: HTTP/JSON on loopback only. Reads the topology, the
link state and the live traffic matrix; sets circuits or lightpaths and the controller's settings;
streams reconfiguration events by long polling. It cannot run anything on hosts."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from testbed.fabrics.programming import link_state
from testbed.fabrics.rendering import PlanError

MAX_BODY_BYTES = 1 << 20
MAX_WAIT_S = 30.0


class BadRequest(ValueError):
    pass


def _int_list(item, length: int, what: str) -> tuple[int, ...]:
    if not isinstance(item, list) or len(item) != length or not all(isinstance(x, int) and not isinstance(x, bool)
                                                                     for x in item):
        raise BadRequest(f"each {what} must be a list of {length} integers, not {json.dumps(item)}")
    return tuple(item)


def parse_links(kind: str, body: dict) -> dict:
    """The link state in a PUT body: {"circuits": [[switch, src, dst], ...]} or
    {"lightpaths": [[src, dst, wavelengths], ...]}."""
    if not isinstance(body, dict) or set(body) != {kind}:
        raise BadRequest(f"the body must be a JSON object with exactly one key, '{kind}'")
    items = body[kind]
    if not isinstance(items, list):
        raise BadRequest(f"'{kind}' must be a list")
    if kind == "circuits":
        state: dict = {}
        for item in items:
            key = _int_list(item, 3, "circuit ([switch, src, dst])")
            if key in state:
                raise BadRequest(f"circuit {list(key)} is listed twice")
            state[key] = 1
        return state
    state = {}
    for item in items:
        src, dst, count = _int_list(item, 3, "lightpath ([src, dst, wavelengths])")
        if (src, dst) in state:
            raise BadRequest(f"lightpath {src}->{dst} is listed twice")
        state[(src, dst)] = count
    return state


class _Handler(BaseHTTPRequestHandler):
    app: Any = None  # the controller (an os-ken app), set by serve()

    def log_message(self, fmt, *args):  # the controller's log stays readable
        pass

    def _reply(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise BadRequest(f"the body is larger than {MAX_BODY_BYTES} bytes")
        try:
            return json.loads(self.rfile.read(length) or b"null")
        except ValueError as error:
            raise BadRequest(f"the body is not valid JSON ({error})") from None

    def _handle(self, method: str) -> None:
        app = self.app
        url = urlparse(self.path)
        try:
            if method == "GET" and url.path == "/topology":
                return self._reply(200, app.topology.as_dict())
            if method == "GET" and url.path == "/plan":
                return self._reply(200, app.snapshot())
            if method == "GET" and url.path == "/traffic":
                return self._reply(200, app.traffic())
            if method == "GET" and url.path == "/events":
                query = parse_qs(url.query)
                after = int(query.get("after", ["0"])[0])
                wait_s = min(MAX_WAIT_S, float(query.get("wait_s", ["0"])[0]))
                deadline = time.monotonic() + wait_s
                while len(app.reconfig_events) <= after and time.monotonic() < deadline:
                    time.sleep(0.01)
                return self._reply(200, {"events": app.reconfig_events[after:], "next": len(app.reconfig_events)})
            if method == "PUT" and url.path in ("/circuits", "/lightpaths"):
                kind = url.path[1:]
                expected = link_state(app.topology)
                if kind != expected:
                    raise BadRequest(f"this fabric takes {expected}, not {kind}")
                ident = app.submit(parse_links(kind, self._body()))
                return self._reply(202, {"id": ident, "changed": ident is not None})
            if method == "PATCH" and url.path == "/settings":
                body = self._body()
                if not isinstance(body, dict):
                    raise BadRequest("the body must be a JSON object of settings")
                return self._reply(200, {"settings": app.update_settings(body)})
            return self._reply(404, {"error": f"no {method} {url.path}; see docs/optical.md, the northbound API"})
        except (BadRequest, PlanError, ValueError) as error:
            return self._reply(400, {"error": str(error)})

    def do_GET(self):
        self._handle("GET")

    def do_PUT(self):
        self._handle("PUT")

    def do_PATCH(self):
        self._handle("PATCH")


def serve(app) -> ThreadingHTTPServer:
    """Listen on a free loopback port in a background thread."""
    handler = type("Handler", (_Handler,), {"app": app})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server

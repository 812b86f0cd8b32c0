"""Python client of the northbound API (what a researcher's controller script imports)."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


class NorthboundError(RuntimeError):
    """The API refused a request; the message says why."""


class Northbound:
    """`Northbound.for_run("runs/x")` while `testbed run` is live, or `Northbound("http://127.0.0.1:P")`."""

    def __init__(self, url: str, timeout_s: float = 40.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    @classmethod
    def for_run(cls, run_dir: str | Path, wait_s: float = 60.0, appear_s: float = 10.0) -> "Northbound":
        """The API of a live run, waiting up to `wait_s` for its fabric to come up (and `appear_s`
        for the run directory itself, which a run started just before may not have made yet)."""
        directory = Path(run_dir)
        ready = directory / "controller.ready"
        started = time.monotonic()
        said = False
        while not ready.exists():
            waited = time.monotonic() - started
            if not directory.is_dir() and waited > appear_s:
                raise NorthboundError(f"{run_dir} is not a run directory (nothing there after {appear_s:.0f} s); "
                                      f"start `testbed run SCENARIO --out {run_dir} --hold` first")
            if (directory / "results.json").exists():
                raise NorthboundError(f"the run in {run_dir} has ended; start it again with --hold to keep its "
                                      f"fabric up")
            if waited > wait_s:
                raise NorthboundError(f"{run_dir} has no live controller (no controller.ready after {wait_s:.0f} s); "
                                      f"start `testbed run` on a sip-ocs or sip-ring scenario first")
            if waited > 2.0 and not said:
                print(f"waiting up to {wait_s:.0f} s for the fabric of {run_dir} to come up ...", file=sys.stderr)
                said = True
            time.sleep(0.1)
        api = json.loads(ready.read_text()).get("api")
        if not api or api.endswith(":None"):
            raise NorthboundError(f"the fabric of {run_dir} has no northbound API (only sip-ocs and sip-ring do)")
        return cls(api)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            try:
                message = json.loads(error.read()).get("error", str(error))
            except ValueError:
                message = str(error)
            raise NorthboundError(message) from None
        except urllib.error.URLError as error:
            raise NorthboundError(f"cannot reach the northbound API at {self.url}: {error.reason}") from None

    def topology(self) -> dict:
        return self._call("GET", "/topology")

    def plan(self) -> dict:
        """{"kind": "circuits"|"lightpaths", <kind>: [...], "settings": {...}, "busy": bool}"""
        return self._call("GET", "/plan")

    def traffic(self) -> dict:
        """Bytes per GPU pair in the last estimation period and in total (N×N, emulated bytes)."""
        return self._call("GET", "/traffic")

    def events(self, after: int = 0, wait_s: float = 0.0) -> tuple[list[dict], int]:
        """Reconfiguration events after the first `after`; waits up to `wait_s` for a new one."""
        reply = self._call("GET", f"/events?after={after}&wait_s={wait_s}")
        return reply["events"], reply["next"]

    def set_circuits(self, circuits: list[tuple[int, int, int]]) -> int | None:
        """Replace every circuit: [(ocs, src, dst), ...]. Returns the reconfiguration's id (None: no change)."""
        return self._call("PUT", "/circuits", {"circuits": [list(c) for c in circuits]})["id"]

    def set_lightpaths(self, lightpaths: list[tuple[int, int, int]]) -> int | None:
        """Replace the wavelength plan: [(src, dst, wavelengths), ...]."""
        return self._call("PUT", "/lightpaths", {"lightpaths": [list(p) for p in lightpaths]})["id"]

    def settings(self, **changes: Any) -> dict:
        """Read or change `policy` (one-shot | multi-shot | periodic), `reconfig_us`, `estimate_period_us`
        (real-world microseconds; the controller dilates them)."""
        return self._call("PATCH", "/settings", changes)["settings"]

    def wait_for(self, ident: int | None, timeout_s: float = 30.0) -> dict | None:
        """Block until reconfiguration `ident` has restored its links; returns its event (None for a
        request that changed nothing)."""
        if ident is None:
            return None
        after = 0
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            events, after_next = self.events(after, wait_s=min(5.0, max(0.0, deadline - time.monotonic())))
            for event in events:
                if event["id"] == ident:
                    return event if event["kind"] == "reconfiguration" else None
            after = after_next
        raise NorthboundError(f"reconfiguration {ident} did not finish within {timeout_s:.0f} s")

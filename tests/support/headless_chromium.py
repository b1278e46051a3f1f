"""A headless Chromium driven through the DevTools protocol on a pipe (--remote-debugging-pipe: commands
on the browser's fd 3, replies and events on its fd 4, each a JSON message ended by a NUL byte), so a
test can load a page and read what the browser saw: console messages, uncaught errors, every network
request, the rendered DOM, and a screenshot. Standard library only."""
import base64
import json
import os
import select
import shutil
import subprocess
import time

NAMES = ("chromium", "chromium-browser")
# what the test's page may log or request, read from these DevTools events
CONSOLE_EVENTS = ("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded")
REQUEST_EVENT = "Network.requestWillBeSent"


def find() -> str | None:
    return next((p for p in map(shutil.which, NAMES) if p), None)


class Browser:
    def __init__(self, executable: str, profile_dir: str, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_pipes():  # in the child: the DevTools pipe lives on fds 3 and 4
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.process = subprocess.Popen(
            [executable, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-default-apps", "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND",
             f"--user-data-dir={profile_dir}", "about:blank"],
            preexec_fn=wire_pipes, pass_fds=(3, 4),  # kept open across exec (the rest is closed)
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("headless Chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("headless Chromium closed its DevTools pipe: "
                                   + self.process.stderr.read().decode(errors="replace")[-2000:])
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def send(self, method: str, session: str | None = None, **params) -> dict:
        self._next_id += 1
        command = {"id": self._next_id, "method": method, "params": params}
        if session:
            command["sessionId"] = session
        os.write(self._to_browser, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"DevTools {method}: {message['error']}")
                return message["result"]
            self.events.append(message)

    def wait_for(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout_s
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            message = self._read_message(deadline)
            self.events.append(message)
            if message.get("method") == method:
                return message

    def open(self, url: str) -> str:
        """Loads url in a new tab with console, log and network events on; returns the tab's session."""
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.send(f"{domain}.enable", session)
        self.send("Page.navigate", session, url=url)
        self.wait_for("Page.loadEventFired")
        return session

    def evaluate(self, session: str, expression: str):
        result = self.send("Runtime.evaluate", session, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, session: str, path) -> None:
        data = self.send("Page.captureScreenshot", session, format="png", captureBeyondViewport=True)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def seen(self, methods) -> list[dict]:
        return [e for e in self.events if e.get("method") in methods]

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass  # already gone: terminated below
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        self.process.stderr.close()

"""epicbox, driven by bench/peers.py: one epicbox.run() per request line, as epicbox's users call it.

    .cache/bench/epicbox-venv/bin/python bench/epicbox_worker.py IMAGE SLOTS

Runs in epicbox's own virtual environment (bench/epicbox-requirements.txt) and imports nothing of
this project.  It configures one profile, "coursebot", on IMAGE (the project's job image: there is no
Docker Hub here) as a non-root user, then reads one JSON request per line on stdin:

    {"id": 1, "command": "python3 main.py", "files": [{"name": "main.py", "content": "..."}],
     "stdin": "..." | null, "limits": {"cputime": 65, "realtime": 120, "memory": 512, "processes": 32}}

and answers each, in any order (SLOTS at once, like a 2-slot pool), with one JSON line on stdout:

    {"id": 1, "ok": true, "elapsed_s": 2.61, "exit_code": 0, "stdout": BASE64, "stderr": BASE64,
     "timeout": false, "oom_killed": false}
    {"id": 1, "ok": false, "error": "DockerError: ..."}

``elapsed_s`` is epicbox.run's own wall time, measured here: the pipes to the benchmark are not epicbox's.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import epicbox

PROFILE = "coursebot"


def run_one(request: dict) -> dict:
    files = [{"name": f["name"], "content": f["content"].encode()} for f in request.get("files") or ()]
    stdin = request.get("stdin")
    started = time.perf_counter()
    try:
        result = epicbox.run(PROFILE, request["command"], files=files, stdin=stdin, limits=dict(request["limits"]))
    except Exception as e:  # epicbox's DockerError and anything below it: the benchmark reports it
        return {"id": request["id"], "ok": False, "error": f"{type(e).__name__}: {e}"}
    return {
        "id": request["id"],
        "ok": True,
        "elapsed_s": time.perf_counter() - started,
        "exit_code": result["exit_code"],
        "stdout": base64.b64encode(result["stdout"] or b"").decode(),
        "stderr": base64.b64encode(result["stderr"] or b"").decode(),
        "timeout": bool(result["timeout"]),
        "oom_killed": bool(result["oom_killed"]),
    }


def main() -> None:
    image, slots = sys.argv[1], int(sys.argv[2])
    epicbox.configure(profiles=[epicbox.Profile(PROFILE, image, user="65534:65534")])
    out_lock = threading.Lock()

    def answer(request: dict) -> None:
        reply = run_one(request)
        with out_lock:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()

    with ThreadPoolExecutor(slots) as pool:
        print(json.dumps({"ready": True, "epicbox": epicbox.__name__}), flush=True)
        for line in sys.stdin:
            if line.strip():
                pool.submit(answer, json.loads(line))


if __name__ == "__main__":
    main()

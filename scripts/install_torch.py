"""Install the right build of torch into the running Python (``make setup`` calls it with the venv's Python).

    python scripts/install_torch.py [--index-url URL] [--dry-run] [SPEC ...]     (default SPEC: torch)

What it does, in this order:

1. **An installed torch is kept.** If ``import torch`` would work, nothing is installed (``--force`` to reinstall).
2. **No NVIDIA GPU** (``nvidia-smi`` missing, failing, or listing no GPU): the CPU build. On Linux that is PyTorch's
   CPU wheel index (https://download.pytorch.org/whl/cpu) when it answers within a few seconds, else the default
   index (pip's configuration decides; there, Linux wheels of recent torch are CUDA builds that pull several GB of
   CUDA libraries, which is why the CPU index comes first). On macOS and Windows the default index serves CPU
   builds already.
3. **An NVIDIA GPU**: the CUDA build that the driver supports. ``nvidia-smi`` reports the newest CUDA version the
   driver can run; the newest of :data:`CUDA_BUILDS` not above it is taken from PyTorch's index
   (``.../whl/cu128`` etc.), else the default index.
4. ``--index-url URL`` (``make setup TORCH_INDEX_URL=URL``) overrides the choice of index; the SPEC words
   (``make setup TORCH_SPEC="torch==2.13.0 torchvision"``) go to pip as they are, so a version, several packages or
   a pip option can be given.

The decision is :func:`plan`, a pure function of what it is told (tests/test_install_torch.py mocks nvidia-smi and the
index); only the standard library is used, since this runs before anything is installed.
"""
from __future__ import annotations

import argparse
import importlib.util
import platform
import re
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import dataclass

PYTORCH_INDEX = "https://download.pytorch.org/whl"
# CUDA builds of torch that PyTorch's index carries for recent releases (major, minor), newest first. A driver
# that supports CUDA X.Y runs builds up to X.Y. Update with the torch release (or pass TORCH_INDEX_URL).
CUDA_BUILDS = [(13, 0), (12, 8), (12, 6)]
PROBE_TIMEOUT = 5.0  # seconds to wait for PyTorch's index before falling back to the default one


@dataclass(frozen=True)
class Plan:
    action: str            # "keep" or "install"
    reason: str
    pip_args: tuple = ()   # the arguments after `python -m pip install`

    def command(self, python: str = sys.executable) -> list[str]:
        return [python, "-m", "pip", "install", *self.pip_args]


def cuda_version_from_smi(output: str) -> tuple[int, int] | None:
    """The 'CUDA Version: 12.4' of nvidia-smi's banner, as (12, 4), or None."""
    m = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", output)
    return (int(m.group(1)), int(m.group(2))) if m else None


def detect_gpu(run=subprocess.run, which=shutil.which) -> tuple[bool, tuple[int, int] | None, str]:
    """(an NVIDIA GPU is usable, the CUDA version its driver supports, what was seen)."""
    if which("nvidia-smi") is None:
        return False, None, "no nvidia-smi"
    try:
        listing = run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, None, f"nvidia-smi failed ({exc})"
    if listing.returncode != 0 or "GPU" not in listing.stdout:
        return False, None, f"nvidia-smi lists no GPU (exit {listing.returncode})"
    try:
        banner = run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        banner = ""
    gpus = listing.stdout.strip().splitlines()
    return True, cuda_version_from_smi(banner), f"{len(gpus)} GPU(s): {gpus[0]}"


def reachable(url: str, timeout: float = PROBE_TIMEOUT) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout) as resp:
            return resp.status < 400
    except Exception:  # any failure means: use the default index
        return False


def cuda_build(driver_cuda: tuple[int, int] | None) -> tuple[int, int] | None:
    """The newest CUDA build in CUDA_BUILDS that a driver supporting ``driver_cuda`` runs."""
    if driver_cuda is None:
        return None
    for build in CUDA_BUILDS:
        if build <= driver_cuda:
            return build
    return None


def plan(spec: list[str], *, torch_installed: bool, gpu: bool, driver_cuda: tuple[int, int] | None,
         system: str, index_url: str | None, index_reachable, force: bool = False) -> Plan:
    """What to install. ``index_reachable(url) -> bool`` is only called when the choice depends on it."""
    spec = list(spec) or ["torch"]
    if torch_installed and not force:
        return Plan("keep", "torch is already installed (kept; --force or pip install to change it)")
    if index_url:
        return Plan("install", f"index given: {index_url}", ("--index-url", index_url, *spec))
    if not gpu:
        if system != "Linux":
            return Plan("install", f"no NVIDIA GPU on {system}: the default index serves CPU builds", tuple(spec))
        url = f"{PYTORCH_INDEX}/cpu"
        if index_reachable(url):
            return Plan("install", "no NVIDIA GPU: PyTorch's CPU wheel index", ("--index-url", url, *spec))
        return Plan("install", f"no NVIDIA GPU, {url} not reachable: the default index", tuple(spec))
    build = cuda_build(driver_cuda)
    if build is None:
        return Plan("install", f"NVIDIA GPU, driver CUDA {driver_cuda}: no matching build known, the default index",
                    tuple(spec))
    url = f"{PYTORCH_INDEX}/cu{build[0]}{build[1]}"
    if index_reachable(url):
        return Plan("install", f"NVIDIA GPU, driver supports CUDA {driver_cuda[0]}.{driver_cuda[1]}: "
                               f"the CUDA {build[0]}.{build[1]} build", ("--index-url", url, *spec))
    return Plan("install", f"NVIDIA GPU, {url} not reachable: the default index", tuple(spec))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", nargs="*", help="what pip installs (default: torch), e.g. torch==2.13.0 torchvision")
    ap.add_argument("--index-url", default=None, help="take torch from this index (overrides the choice)")
    ap.add_argument("--force", action="store_true", help="install even if torch is already installed")
    ap.add_argument("--dry-run", action="store_true", help="print the decision and the pip command only")
    args, extra = ap.parse_known_args(argv)  # pip options in SPEC (e.g. --pre) pass through
    spec = [*args.spec, *extra]
    installed = importlib.util.find_spec("torch") is not None
    gpu, cuda, seen = (False, None, "not looked") if installed and not args.force else detect_gpu()
    p = plan(spec, torch_installed=installed, gpu=gpu, driver_cuda=cuda, system=platform.system(),
             index_url=args.index_url or None, index_reachable=reachable, force=args.force)
    print(f"install_torch: {p.reason} [{seen}]", flush=True)
    if p.action == "keep":
        return 0
    cmd = p.command()
    print("install_torch:", " ".join(cmd), flush=True)
    if args.dry_run:
        return 0
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())

"""scripts/install_torch.py: which torch `make setup` installs, with nvidia-smi and the indexes mocked."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("install_torch", ROOT / "scripts" / "install_torch.py")
it = importlib.util.module_from_spec(spec)
sys.modules["install_torch"] = it
spec.loader.exec_module(it)

CPU = "https://download.pytorch.org/whl/cpu"
SMI_BANNER = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.86.15              Driver Version: 570.86.15      CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+"""


def plan(spec=("torch==2.13.0",), *, installed=False, gpu=False, cuda=None, system="Linux", index_url=None,
         up=True, force=False):
    asked = []

    def probe(url):
        asked.append(url)
        return up

    p = it.plan(list(spec), torch_installed=installed, gpu=gpu, driver_cuda=cuda, system=system,
                index_url=index_url, index_reachable=probe, force=force)
    return p, asked


def test_installed_torch_is_kept_and_nothing_is_probed():
    p, asked = plan(installed=True, gpu=True, cuda=(12, 8))
    assert p.action == "keep" and p.pip_args == () and asked == []


def test_force_reinstalls():
    p, _ = plan(installed=True, force=True)
    assert p.action == "install" and p.pip_args == ("--index-url", CPU, "torch==2.13.0")


def test_no_gpu_on_linux_takes_the_cpu_index_when_it_answers():
    p, asked = plan()
    assert asked == [CPU]
    assert p.command("py") == ["py", "-m", "pip", "install", "--index-url", CPU, "torch==2.13.0"]


def test_no_gpu_on_linux_falls_back_to_the_default_index():
    p, asked = plan(up=False)
    assert asked == [CPU] and p.pip_args == ("torch==2.13.0",)


@pytest.mark.parametrize("system", ["Darwin", "Windows"])
def test_no_gpu_elsewhere_uses_the_default_index_without_probing(system):
    p, asked = plan(system=system)
    assert asked == [] and p.pip_args == ("torch==2.13.0",)


@pytest.mark.parametrize("cuda, build", [((12, 8), "cu128"), ((12, 9), "cu128"), ((13, 2), "cu130"),
                                         ((12, 6), "cu126"), ((12, 7), "cu126")])
def test_gpu_gets_the_newest_cuda_build_its_driver_runs(cuda, build):
    p, asked = plan(gpu=True, cuda=cuda)
    url = f"https://download.pytorch.org/whl/{build}"
    assert asked == [url] and p.pip_args == ("--index-url", url, "torch==2.13.0")


def test_gpu_with_an_old_driver_or_unknown_version_uses_the_default_index():
    for cuda in [(11, 8), None]:
        p, asked = plan(gpu=True, cuda=cuda)
        assert asked == [] and p.pip_args == ("torch==2.13.0",)


def test_gpu_index_unreachable_falls_back_to_the_default_index():
    p, _ = plan(gpu=True, cuda=(12, 8), up=False)
    assert p.pip_args == ("torch==2.13.0",)


def test_index_override_and_spec_words_pass_through():
    p, asked = plan(["torch==2.13.0", "torchvision", "--pre"], index_url="https://example.org/simple", gpu=True,
                    cuda=(12, 8))
    assert asked == []
    assert p.pip_args == ("--index-url", "https://example.org/simple", "torch==2.13.0", "torchvision", "--pre")


def test_empty_spec_means_torch():
    p, _ = plan([])
    assert p.pip_args[-1] == "torch"


def fake_run(listing: str | None, rc: int = 0, banner: str = SMI_BANNER):
    def run(cmd, **kw):
        if listing is None:
            raise OSError("boom")
        return SimpleNamespace(returncode=rc, stdout=listing if cmd == ["nvidia-smi", "-L"] else banner)
    return run


def test_detect_gpu_without_nvidia_smi():
    assert it.detect_gpu(run=fake_run("GPU 0"), which=lambda name: None)[:2] == (False, None)


def test_detect_gpu_with_a_failing_or_empty_nvidia_smi():
    which = lambda name: "/usr/bin/nvidia-smi"
    assert it.detect_gpu(run=fake_run(None), which=which)[0] is False
    assert it.detect_gpu(run=fake_run("", rc=9), which=which)[0] is False
    assert it.detect_gpu(run=fake_run("No devices were found", rc=6), which=which)[0] is False


def test_detect_gpu_reads_the_driver_cuda_version():
    gpu, cuda, seen = it.detect_gpu(run=fake_run("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)"),
                                    which=lambda name: "/usr/bin/nvidia-smi")
    assert gpu is True and cuda == (12, 8) and "H100" in seen


def test_the_command_line_keeps_this_venvs_torch():
    """The venv has torch: make setup must leave it alone (and print why)."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "install_torch.py"), "torch==2.13.0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "kept" in proc.stdout


def test_the_makefile_passes_torch_spec_and_the_index_unquoted():
    proc = subprocess.run(["make", "-n", "-B", "-f", "Makefile", ".venv/.installed",
                           "TORCH_SPEC=torch==2.13.0 torchvision", "TORCH_INDEX_URL=https://example.org/simple"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if "install_torch.py" in l)
    assert line.rstrip().endswith("--index-url https://example.org/simple torch==2.13.0 torchvision"), line

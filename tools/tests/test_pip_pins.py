"""An exact pin holds whatever cap the machine's pip configuration sets (tools/pip_pins.py).

Each test builds the situation of a machine that keeps only the torch releases on its own disk:
a pip configuration file whose constraints file says `torch<=2.14.1`, and the pin an env
installs, torch==2.15.0. The releases are tiny wheels made here (named torch, scikit-build-core
and numpy), found through the configuration's find-links with no index, and installed into a
scratch venv by the env's own install step: the commands tox.ini's torch-beside envs run, and
tools/install_packages.py (every other env's). A step that stops lifting the cap fails here,
not on the next fresh machine.
"""

from __future__ import annotations

import base64
import configparser
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
PIN = "2.15.0"
CAP = "2.14.1"


def make_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel of one empty module, as pip installs any other."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{dist}_marker.py": "",
        f"{info}/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: kvbridge-test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for arcname, text in files.items():
            whl.writestr(arcname, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
            record.append(f"{arcname},sha256={digest.decode()},{len(text.encode())}")
        record.append(f"{info}/RECORD,,")
        whl.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture(scope="module")
def machine(tmp_path_factory) -> dict:
    """A venv, and the environment of a machine whose pip configuration caps torch below PIN."""
    tmp = tmp_path_factory.mktemp("capped")
    wheels = tmp / "wheels"
    wheels.mkdir()
    for version in (CAP, PIN):
        make_wheel(wheels, "torch", version)
    make_wheel(wheels, "scikit-build-core", "1.1")
    make_wheel(wheels, "numpy", "1.26.0")
    user = make_wheel(wheels, "kvbridge-fake-user", "1.0", ("torch>=2.11",))
    (tmp / "constraints.txt").write_text(f"# only the releases on disk\ntorch<={CAP}\n")
    (tmp / "pip.conf").write_text(f"[global]\nno-index = true\nfind-links = {wheels}\n"
                                  f"constraint = {tmp / 'constraints.txt'}\n")  # fmt: skip
    # Only this configuration file: the machine's own PIP_* settings would outrank it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=str(tmp / "pip.conf"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env, timeout=120)
    return {"python": str(venv / "bin" / "python"), "env": env, "tmp": tmp, "user": user}


def installed_torch(machine: dict) -> str | None:
    shown = subprocess.run([machine["python"], "-m", "pip", "show", "torch"], env=machine["env"],
                           check=False, capture_output=True, text=True, timeout=60)  # fmt: skip
    return next(iter(re.findall(r"^Version: (\S+)", shown.stdout, re.M)), None)


def uninstall_torch(machine: dict) -> None:
    subprocess.run([machine["python"], "-m", "pip", "uninstall", "-y", "-q", "torch"],
                   env=machine["env"], check=False, capture_output=True, timeout=60)  # fmt: skip


def test_the_cap_is_in_force_for_a_plain_pip_install(machine):
    """The situation is real: pip as configured refuses the pin (so the tests below can fail)."""
    uninstall_torch(machine)
    done = subprocess.run([machine["python"], "-m", "pip", "install", f"torch=={PIN}"],
                          env=machine["env"], check=False, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode != 0 and "ResolutionImpossible" in done.stderr, done.stderr
    assert installed_torch(machine) is None


def torch_beside_steps() -> list[str]:
    """The commands of tox.ini's torch-beside envs that install torch (the pin, then the wheel
    beside it), as tox would run them with KVBRIDGE_TORCH=PIN."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    logical = re.sub(r"\\\n\s*", " ", tox["kvbridge:torch-beside"]["commands_pre"])
    commands = [c for c in logical.splitlines() if c.strip() and not c.strip().startswith("#")]
    steps = [m for c in commands
             for m in re.findall(r"python \{tox_root\}/tools/pip_pins\.py [^&']+", c)]  # fmt: skip
    return [s.replace("{tox_root}", str(ROOT)).replace("{env:KVBRIDGE_TORCH}", PIN).strip()
            for s in steps]  # fmt: skip


def test_torch_beside_installs_its_pin_and_the_wheel_beside_it_under_a_cap(machine):
    steps = torch_beside_steps()
    assert len(steps) == 2, f"tox.ini's torch-beside install steps changed: {steps}"
    uninstall_torch(machine)
    pin, wheel = steps
    for step in (pin, wheel.replace('"$w"', str(machine["user"]))):
        argv = step.split()
        done = subprocess.run([machine["python"], *argv[1:]], env=machine["env"],
                              check=False, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, f"{step}\n{done.stderr}"
        # Not swapped for the capped release when the wheel's `torch>=2.11` is resolved
        assert installed_torch(machine) == PIN, step


def test_install_packages_installs_the_torch_it_builds_against_under_a_cap(machine):
    """A torch-built env's step (KVBRIDGE_TORCH): its requirements, then the build, which fails
    here on the fake torch after the requirements are in."""
    uninstall_torch(machine)
    done = subprocess.run(
        [machine["python"], str(ROOT / "tools" / "install_packages.py"), "--build-root",
         str(machine["tmp"] / "build"), "torch_stable"],
        env={**machine["env"], "KVBRIDGE_TORCH": PIN}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert "building torch_stable" in done.stdout, done.stdout + done.stderr
    assert installed_torch(machine) == PIN


def test_other_constraints_and_other_packages_keep_the_cap(machine, tmp_path):
    """Only the pinned package's lines are lifted: a cap on another package still holds."""
    sys.path.insert(0, str(ROOT / "tools"))
    import pip_pins

    env = {**machine["env"]}
    (tmp_path / "c.txt").write_text(f"torch<={CAP}\nnumpy<1.25  # kept\n")
    env["PIP_CONSTRAINT"] = str(tmp_path / "c.txt")
    saved = os.environ.copy()
    try:
        os.environ.clear()
        os.environ.update(env)
        lifted = pip_pins.environ([f"torch=={PIN}", "numpy>=1"], tmp_path / "pins",
                                  [machine["python"]])  # fmt: skip
    finally:
        os.environ.clear()
        os.environ.update(saved)
    text = Path(lifted["PIP_CONSTRAINT"]).read_text()
    assert "numpy<1.25" in text and not re.search(r"^torch", text, re.M), text

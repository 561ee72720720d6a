"""tools/sid_chroot.py: what it carries into the chroot and how it enters it (the chroot's own
envs, py314-*/py315-*, run the suite in it under make test-all)."""

import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tools/, a folder of scripts
import sid_chroot  # noqa: E402


def test_pip_settings_name_the_files_to_copy_and_the_folders_to_mount(tmp_path, monkeypatch):
    index = tmp_path / "pypi" / "simple"
    index.mkdir(parents=True)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    cert, constraints = tmp_path / "ca.crt", tmp_path / "constraints.txt"
    cert.write_text("")
    constraints.write_text("torch<=2.14.1\n")
    config = tmp_path / "pip.conf"
    absent = tmp_path / "absent"
    config.write_text(f"[global]\nconstraint = {constraints}\nextra-index-url = file://{index} "
                      f"https://index.example/simple\nfind-links = {absent}\n")  # fmt: skip
    monkeypatch.setattr(sid_chroot, "PIP_CONFIG_FILES", [str(config)])
    for name in [k for k in sid_chroot.os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(name)  # this machine's own settings are not the test's
    monkeypatch.setenv("PIP_CERT", str(cert))
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    files, folders = sid_chroot.pip_paths()
    assert set(files) == {config, constraints, cert}
    # a file:// index's pages link files beside it: its parent; a missing path is left out
    assert set(folders) == {wheels, index.parent}


def test_files_are_copied_to_their_own_paths_inside(tmp_path):
    root = tmp_path / "chroot"
    source = tmp_path / "etc" / "pip.conf"
    source.parent.mkdir()
    source.write_text("[global]\n")
    sid_chroot.copy_in(root, [source])
    assert (root / source.relative_to("/")).read_text() == "[global]\n"


def test_the_script_mounts_then_enters_with_only_the_settings_it_passes(monkeypatch):
    monkeypatch.setenv("PIP_CERT", "/etc/ca.crt")
    monkeypatch.setenv("SECRET_TOKEN", "x")
    monkeypatch.setenv("TOX_ENV_DIR", "/work/.tox/py315-cython")
    root, repo, index = Path("/c"), Path("/work/repo"), Path("/opt/pypi")
    text = sid_chroot.script(root, ["tox", "run", "-e", "sid-py315-cython"], repo,
                             [(index, False), (repo, True)], {"A": "1"})  # fmt: skip
    lines = text.splitlines()
    assert lines[1:3] == ["mount --rbind /dev /c/dev", "mount -t proc proc /c/proc"]
    assert "mount --bind /opt/pypi /c/opt/pypi" in lines
    assert "mount -o remount,bind,ro /c/opt/pypi" in lines  # the host's indexes: read-only
    assert "mount --bind /work/repo /c/work/repo" in lines
    assert "mount -o remount,bind,ro /c/work/repo" not in lines  # tox writes its envs there
    enter = shlex.split(lines[-1])
    assert enter[:5] == ["exec", "chroot", "/c", "env", "-i"]
    settings = dict(s.split("=", 1) for s in enter[5:-3])
    assert settings["PIP_CERT"] == "/etc/ca.crt" and settings["A"] == "1"
    assert settings["HOME"] == "/root" and settings["PATH"] == sid_chroot.PATH
    assert "SECRET_TOKEN" not in settings and "TOX_ENV_DIR" not in settings
    assert enter[-3:-1] == ["sh", "-c"]
    assert enter[-1] == "cd /work/repo && exec tox run -e sid-py315-cython"


def test_a_half_built_chroot_is_not_found(tmp_path):
    for path in [f"usr/bin/python{v}" for v in sid_chroot.PYTHONS] + ["opt/kvbridge-tox/bin/tox"]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert not sid_chroot.is_whole(tmp_path)  # no marker: the build did not finish
    marker = tmp_path / sid_chroot.MARKER
    marker.write_text("Python 3.14.10\nPython 3.15.2\nbuilt with: python3.14 g++\n")
    assert not sid_chroot.is_whole(tmp_path)  # built with another list: built anew
    marker.write_text(f"Python 3.14.10\nPython 3.15.2\n{sid_chroot.contents()}\n")
    assert sid_chroot.is_whole(tmp_path)


def test_usage_errors_say_what_it_takes(monkeypatch, capsys):
    for args in (["tox"], ["run", "--"], ["run", "--with", "/nonexistent", "--", "true"], ["x"]):
        monkeypatch.setattr(sys, "argv", ["sid_chroot.py", *args])
        assert sid_chroot.main() == 2, args
        assert "usage:" in capsys.readouterr().err

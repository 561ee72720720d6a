"""tox's one plugin here (tox loads a project's toxfile.py itself): the runner of the envs whose
Python lives in Debian sid's chroot (tools/sid_chroot.py).

`tox -e py315-cython` must work from this folder as every other env does, but no Python 3.15
runs on this machine: that env is a venv of the Python running tox whose one command runs
sid-py315-cython in tox inside the chroot, where python3.15 is. tox refuses an env whose name
names one Python (py315) while its base_python is another; this runner is that venv without
the refusal, and nothing else.
"""

from __future__ import annotations

from tox.plugin import impl
from tox.tox_env.python.virtual_env.runner import VirtualEnvRunner


class SidChroot(VirtualEnvRunner):
    @staticmethod
    def id() -> str:
        return "sid-chroot"

    @classmethod
    def _validate_base_python(cls, env_name, base_pythons, ignore_base_python_conflict):  # noqa: ANN001, ANN206
        return base_pythons


@impl
def tox_register_tox_env(register) -> None:  # noqa: ANN001
    register.add_run_env(SidChroot)

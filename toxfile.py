"""tox's one plugin here (tox loads a project's toxfile.py itself): the per-package envs, made
from packages/registry.json, and the runner of the envs whose Python lives in Debian sid's
chroot.

The envs. tools/envs.py says which envs each registry row makes (`tox l` lists them). Each
reads, before tox.ini's [testenv], its family's section `[kvbridge:<family>]` of tox.ini (the
`base` setting), and gets KVBRIDGE_PACKAGE, the package it runs for, as a set_env default; where
its name does not say its Python, base_python too. So tox.ini names no package, and a new
binding is its folder and its registry row.

The runner. `tox -e py315-cython` must work from this folder as every other env does, but no
Python 3.15 runs on this machine: that env is a venv of the Python running tox whose one
command runs sid-py315-cython in tox inside the chroot, where python3.15 is. tox refuses an env
whose name names one Python (py315) while its base_python is another; this runner is that venv
without the refusal, and nothing else.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tox.config.loader.memory import MemoryLoader
from tox.plugin import impl
from tox.tox_env.python.virtual_env.runner import VirtualEnvRunner

sys.path.insert(0, str(Path(__file__).resolve().parent / "tools"))

import envs  # noqa: E402

ENVS = {e.name: e for e in envs.envs()}


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


@impl
def tox_extend_envs() -> tuple[str, ...]:
    return tuple(ENVS)


@impl
def tox_add_core_config(core_conf, state) -> None:  # noqa: ANN001
    # Seeds are read before tox.ini: `base` picks the family's section, and the runner (read
    # before any env hook) comes from that section too.
    for env in ENVS.values():
        seed = {"base": [f"kvbridge:{env.family}", "testenv"]} if env.family else {}
        if env.base_python:
            seed["base_python"] = [env.base_python]
        if env.depends:
            seed["depends"] = "\n".join(env.depends)
        if seed:
            state.conf.memory_seed_loaders[env.name].append(MemoryLoader(**seed))
    core_conf["env_list"].envs.extend(
        e.name for e in envs.run_order(list(ENVS.values())) if e.listed
    )


@impl
def tox_add_env_config(env_conf, state) -> None:  # noqa: ANN001, ARG001
    env = ENVS.get(env_conf.name)
    if env is not None:  # a default, so that a family's section may still set its own
        defaults = env_conf.default_set_env_loader
        mine = {"KVBRIDGE_PACKAGE": env.package}
        if env.torch:
            mine["KVBRIDGE_TORCH"] = env.torch
        if env.depends:  # the env whose wheel it installs
            mine["KVBRIDGE_WHEEL_FROM"] = env.depends[0]
        env_conf.default_set_env_loader = lambda: {**defaults(), **mine}

"""The build backend of pg-dlock: setuptools', with one fallback.

setuptools before 70.1 builds wheels only with the separate ``wheel``
package.  Debian 12 ships setuptools 66, and python3-wheel is not pulled in
by python3-venv or python3-setuptools: there, ``pip install
--no-build-isolation clients/python`` would fail with "invalid command
'bdist_wheel'".  So where setuptools cannot build a wheel by itself, this
backend makes the (pure Python, py3-none-any) wheel itself, from what
setuptools' ``egg_info`` says: the metadata, the dependencies and the
sources.  Everywhere else it is setuptools.build_meta unchanged.
DLOCK_BUILD_FALLBACK=1 forces the fallback (the tests use it).
"""
from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from typing import Any, Dict, List, Optional

from setuptools import build_meta as _setuptools


def _setuptools_builds_wheels() -> bool:
    if os.environ.get("DLOCK_BUILD_FALLBACK") == "1":
        return False
    for module in ("setuptools.command.bdist_wheel", "wheel.bdist_wheel"):
        try:
            __import__(module)
            return True
        except ImportError:
            pass
    return False


get_requires_for_build_sdist = _setuptools.get_requires_for_build_sdist
build_sdist = _setuptools.build_sdist

if _setuptools_builds_wheels():
    get_requires_for_build_wheel = _setuptools.get_requires_for_build_wheel
    prepare_metadata_for_build_wheel = _setuptools.prepare_metadata_for_build_wheel
    build_wheel = _setuptools.build_wheel
else:
    # no prepare_metadata_for_build_wheel: frontends read the built wheel's

    def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
        return []

    def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                    metadata_directory: Optional[str] = None) -> str:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-c", "import setuptools; setuptools.setup()",
                            "-q", "egg_info", "--egg-base", tmp],
                           check=True, stdout=subprocess.DEVNULL)
            (egg,) = [os.path.join(tmp, d) for d in os.listdir(tmp) if d.endswith(".egg-info")]
            return _make_wheel(egg, wheel_directory)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _metadata(egg: str) -> str:
    """PKG-INFO with the dependencies of requires.txt as Requires-Dist."""
    pkg_info = _read(os.path.join(egg, "PKG-INFO"))
    deps: List[str] = []
    requires = os.path.join(egg, "requires.txt")
    extra = None
    if os.path.exists(requires):
        for line in _read(requires).splitlines():
            line = line.strip()
            if not line:
                continue
            if line.startswith("["):
                extra = line.strip("[]")
                continue
            deps.append(f'Requires-Dist: {line}; extra == "{extra}"' if extra else f"Requires-Dist: {line}")
    head, sep, body = pkg_info.partition("\n\n")
    return head + "".join("\n" + d for d in deps) + sep + body


def _make_wheel(egg: str, wheel_directory: str) -> str:
    meta = _metadata(egg)
    fields = dict(line.split(": ", 1) for line in meta.partition("\n\n")[0].splitlines() if ": " in line)
    name = fields["Name"].replace("-", "_").replace(".", "_")
    version = fields["Version"]
    dist_info = f"{name}-{version}.dist-info"
    files: Dict[str, bytes] = {}
    for src in _read(os.path.join(egg, "SOURCES.txt")).splitlines():
        if src.startswith("src/") and not src.endswith((".pyc", ".pyo")):
            with open(src, "rb") as f:
                files[src[len("src/"):]] = f.read()
    files[f"{dist_info}/METADATA"] = meta.encode("utf-8")
    files[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: dlock_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    ).encode()
    files[f"{dist_info}/top_level.txt"] = _read(os.path.join(egg, "top_level.txt")).encode()
    record = []
    for arc, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arc},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel_name = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files.items():
            z.writestr(arc, data)
    return wheel_name

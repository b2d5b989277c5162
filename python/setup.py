"""Build hook for pyproject.toml: adds the cohort.wire package, generated from the wire schema
(../common/schema/cohort.fbs) by flatc, to what setuptools builds. A missing flatc or schema stops
the build with a message naming it."""

import os
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.normpath(os.path.join(HERE, "..", "common", "schema", "cohort.fbs"))


class BuildPyWithWire(build_py):
    def run(self):
        super().run()
        flatc = shutil.which("flatc")
        if flatc is None:
            raise RuntimeError("flatc not found: install flatbuffers-compiler (scripts/install-deps.sh)")
        if not os.path.exists(SCHEMA):
            raise RuntimeError(f"the wire schema {SCHEMA} is missing: install from a Cohort checkout")
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([flatc, "--python", "--gen-object-api", "-o", out, SCHEMA], check=True)
            target = os.path.join(self.build_lib, "cohort", "wire")
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(os.path.join(out, "cohort", "wire"), target)


setup(cmdclass={"build_py": BuildPyWithWire})

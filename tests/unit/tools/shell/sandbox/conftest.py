"""The sandbox tests' runners: root (or the current user), and an unprivileged user made for the
module, each with a box (workspace, outside, temp dir) it can reach."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from sandbox_helpers import Box, Runner, python_for, temporary_user

CAN_ADD_USERS = os.geteuid() == 0 and shutil.which("useradd") and shutil.which("runuser")


@pytest.fixture(scope="module")
def unprivileged() -> Iterator[Runner]:
    if not CAN_ADD_USERS:
        pytest.skip("creating a test user needs root, useradd and runuser")
    with temporary_user() as name:
        python = python_for(name)
        if python is None:
            pytest.skip(f"no Python interpreter that the test user {name} may run")
        yield Runner("user", name, python)


@pytest.fixture(params=["root", "user"])
def runner(request: pytest.FixtureRequest) -> Runner:
    if request.param == "root":
        if os.geteuid() != 0:
            return Runner("current user")
        return Runner("root")
    runner: Runner = request.getfixturevalue("unprivileged")
    return runner


@pytest.fixture
def box(runner: Runner) -> Iterator[Box]:
    b = Box.make(runner.user)
    yield b
    b.remove()

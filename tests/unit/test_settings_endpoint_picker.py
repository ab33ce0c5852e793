"""kvright.settings: the default endpoint picker of the InferencePools (KVRIGHT_ENDPOINT_PICKER,
KVRIGHT_ENDPOINT_PICKER_PORT, KVRIGHT_ENDPOINT_PICKER_FAILURE_MODE), from a dict standing for the
environment. Nothing is faked."""

from __future__ import annotations

import pytest

from kvright.settings import SettingsError, from_env


@pytest.mark.parametrize(
    ("env", "picker", "port", "mode"),
    [
        ({}, "chat-epp", 9002, "FailClose"),
        (
            {"KVRIGHT_ENDPOINT_PICKER": "epp-{name}", "KVRIGHT_ENDPOINT_PICKER_PORT": "9100"},
            "epp-chat",
            9100,
            "FailClose",
        ),
        (
            {"KVRIGHT_ENDPOINT_PICKER": "shared", "KVRIGHT_ENDPOINT_PICKER_FAILURE_MODE": "FailOpen"},
            "shared",
            9002,
            "FailOpen",
        ),
        ({"KVRIGHT_ENDPOINT_PICKER": ""}, "", 9002, "FailClose"),
    ],
    ids=[
        "unset-the-upstream-convention-name-epp-on-9002",
        "template-and-port",
        "a-fixed-name-fail-open",
        "empty-no-picker",
    ],
)
def test_the_default_picker(env: dict[str, str], picker: str, port: int, mode: str) -> None:
    s = from_env(env)
    assert (s.endpoint_picker_for("chat"), s.endpoint_picker_port, s.endpoint_picker_failure_mode) == (
        picker,
        port,
        mode,
    )


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"KVRIGHT_ENDPOINT_PICKER": "Epp_{name}"}, "KVRIGHT_ENDPOINT_PICKER"),
        ({"KVRIGHT_ENDPOINT_PICKER_PORT": "0"}, "KVRIGHT_ENDPOINT_PICKER_PORT"),
        ({"KVRIGHT_ENDPOINT_PICKER_PORT": "9002.5"}, "KVRIGHT_ENDPOINT_PICKER_PORT"),
        ({"KVRIGHT_ENDPOINT_PICKER_FAILURE_MODE": "failopen"}, "KVRIGHT_ENDPOINT_PICKER_FAILURE_MODE"),
    ],
    ids=["not-a-service-name", "port-out-of-range", "port-not-an-integer", "failure-mode-in-the-wrong-case"],
)
def test_bad_values_name_the_variable(env: dict[str, str], names: str) -> None:
    with pytest.raises(SettingsError, match=names):
        from_env(env)

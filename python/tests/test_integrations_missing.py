"""Each integration is importable only when its package is installed; without it, the
import says which pip command installs the supported version."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.mark.parametrize(
    ("integration", "module", "command"),
    [
        ("rlms", "rlm", "pip install 'rlm-registry[rlms]' (or pip install 'rlms==0.1.3')"),
        ("dspy", "dspy", "pip install 'rlm-registry[dspy]' (or pip install 'dspy==3.4.1')"),
        (
            "verifiers",
            "verifiers.v1",
            "pip install 'rlm-registry[verifiers]' (or pip install 'verifiers==0.4.0')",
        ),
    ],
)
def test_an_integration_without_its_package_names_the_pip_command(
    monkeypatch: pytest.MonkeyPatch, integration: str, module: str, command: str
):
    # None in sys.modules makes `import module` fail as if it were not installed.
    monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.delitem(sys.modules, f"rlm_registry.integrations.{integration}", raising=False)
    with pytest.raises(ImportError) as caught:
        importlib.import_module(f"rlm_registry.integrations.{integration}")
    assert str(caught.value).endswith(command)
    assert f"needs the `{integration}` package" in str(caught.value)

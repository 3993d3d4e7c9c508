"""What every test of the package starts from: no model settings inherited from the
shell that runs pytest, so that an `RLM_MODEL` or API key cannot change what a test sees
(a test that wants one sets it)."""

import pytest

MODEL_SETTINGS = [
    "RLM_BASE_URL",
    "OPENAI_BASE_URL",
    "RLM_MODEL",
    "RLM_API_KEY",
    "OPENAI_API_KEY",
    "RLM_TIMEOUT_SECS",
    "RLM_MAX_REPLY_TOKENS",
    "RLM_REASONING_EFFORT",
    "RLM_MAX_COST",
    "RLM_COMPACT_AT",
]


@pytest.fixture(autouse=True)
def no_llm_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in MODEL_SETTINGS:
        monkeypatch.delenv(name, raising=False)

"""A Rust panic surfaces as InternalError (an Exception, unlike PyO3's PanicException),
and the interpreter, and every other environment, is unharmed."""

import os
import signal
import threading
import time

import pytest

from rlm_registry import Environment, InternalError, RlmRegistryError, _native


def test_a_panic_on_the_calling_thread_is_an_internal_error():
    with pytest.raises(InternalError, match="a panic asked for by the tests") as caught:
        _native._panic_for_tests()
    assert isinstance(caught.value, Exception)
    assert isinstance(caught.value, RlmRegistryError)
    assert "a bug; please report it" in str(caught.value)


def test_a_panic_in_an_environment_closes_it_and_nothing_else():
    broken, other = Environment(), Environment()
    other.execute("kept = 1")
    try:
        broken._panic_for_tests()
    except Exception as error:  # what `except Exception` catches
        assert isinstance(error, InternalError)
    else:
        raise AssertionError("no error")
    assert broken.closed
    with pytest.raises(InternalError, match="closed after this error: a panic asked for by the tests"):
        broken.execute("print(1)")
    assert other["kept"] == 1
    assert Environment().execute("print('new ones work')").stdout == "new ones work\n"


def test_ctrl_c_interrupts_the_execution_and_raises_keyboard_interrupt():
    env = Environment(time_limit=60)
    timer = threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        env.execute("while true do end")
    timer.join()
    assert time.monotonic() - started < 10
    assert env.execute("print('usable')").stdout == "usable\n"

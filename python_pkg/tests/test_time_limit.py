"""A cell's re-run past its time limit gets the interrupt Ctrl-C would send, and again until it
stops: code that catches KeyboardInterrupt once and goes on is still stopped (issue #52)."""

from __future__ import annotations

import time

import pytest
from gpusight.jupyter.time_limit import interrupted_after


def test_a_rerun_that_swallows_the_first_interrupt_is_interrupted_again() -> None:
    caught = 0
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt), interrupted_after(0.2, again_s=0.2) as fired:
        while time.monotonic() - t0 < 10:
            try:
                time.sleep(5)
            except KeyboardInterrupt:
                caught += 1  # a loop that saves a checkpoint on Ctrl-C and goes on
                if caught > 1:
                    raise
    assert fired[0] and caught == 2
    assert time.monotonic() - t0 < 2


def test_a_block_that_ends_in_time_is_never_interrupted() -> None:
    with interrupted_after(0.3, again_s=0.1) as fired:
        time.sleep(0.05)
    time.sleep(0.5)  # past the limit: nothing comes after the block
    assert not fired[0]


def test_the_interrupt_comes_where_sigint_was_blocked_or_ignored() -> None:
    """A library that left SIGINT blocked in the main thread, or ignored, would let a re-run
    that hangs in a sleep hold the what-if to the end of its hang: the limit still stops it,
    and both are put back after."""
    import signal

    before = signal.getsignal(signal.SIGINT)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt), interrupted_after(0.2, again_s=0.2) as fired:
            time.sleep(5)
        assert fired[0] and time.monotonic() - t0 < 2
        assert signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        signal.signal(signal.SIGINT, before)


def test_a_handler_that_only_takes_note_of_sigint_does_not_hold_the_limit_back() -> None:
    import signal

    seen: list[int] = []
    before = signal.signal(signal.SIGINT, lambda signum, _frame: seen.append(signum))
    try:
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt), interrupted_after(0.2, again_s=0.2):
            time.sleep(5)
        assert time.monotonic() - t0 < 2 and not seen
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)

"""The agreement sections computed beside the rest of a report's build (issue 35).

A big study's (``alongside.forks``): a forked process computes the agreement on all labels and its binary
collapse (one bootstrap), hands them over for the first sections as soon as they come, and then takes domains of
the ``by_domain`` section from the front while the build computes its later sections (the reference, quality,
scores, disagreements: database reads, pandas) and then takes domains from the back. Why: at 100,000 items x 3
labels the overall bootstrap, the later sections and the per-domain bootstraps are about 0.9 s each, and the
first two need not wait for each other; on two cores this way the whole build takes about two of them, where
one after the other (the later sections waiting for the overall bootstrap) it took three.

A smaller study's: the overall agreement on the build's thread first (handed over at once), then the domains on
a thread of their own (``alongside.start``) while the later sections are computed.

The numbers are the same either way: each section is the same function of the same inputs
(``agreement.AgreementInputs``), each bootstrap with its own seeded generator; the order of the keys too.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from . import alongside
from .agreement import AgreementInputs

__all__ = ["AgreementBeside", "start"]

logger = logging.getLogger(__name__)

#: The agreement sections' keys in the report, in its order (``AgreementInputs.overall``'s).
KEYS = ("agreement", "binary", "by_domain", "human_ceiling")


class AgreementBeside(ABC):
    """The agreement sections of a build under way: ``so_far`` now, the rest from ``finish``."""

    def __init__(self, so_far: dict[str, Any]) -> None:
        self.so_far = so_far

    @abstractmethod
    def finish(self) -> dict[str, Any]:
        """The agreement sections, whole (waits for what is computed beside the build)."""

    @abstractmethod
    def cancel(self) -> None:
        """The build failed: stop what is computed beside it."""


class _Threaded(AgreementBeside):
    def __init__(self, agreement: AgreementInputs, on_overall: Callable[[dict[str, Any]], None] | None) -> None:
        super().__init__(agreement.overall(on_overall))
        self._by_domain = alongside.start(agreement.by_domain) if agreement.options.by_domain else lambda: None

    def finish(self) -> dict[str, Any]:
        return {**self.so_far, "by_domain": self._by_domain()}

    def cancel(self) -> None:
        """Nothing to stop: a thread cannot be, and its few domains' bootstraps end soon (a small study's)."""


class _Forked(AgreementBeside):
    def __init__(self, agreement: AgreementInputs, on_overall: Callable[[dict[str, Any]], None] | None) -> None:
        super().__init__(dict.fromkeys(KEYS))
        self._agreement, self._on_overall = agreement, on_overall
        self._domains = agreement.domain_names()
        self._claims = alongside.Claims(len(self._domains))
        self._overall: dict[str, Any] | None = None
        self._theirs: dict[int, dict[str, Any]] = {}
        self._child = alongside.Forked(self._child_lane, self._received)

    def _child_lane(self, send: Callable[[tuple[str | int, Any]], None]) -> None:
        """In the child: the first sections (sent before the binary collapse's summary is assembled, as the build's
        thread hands them over), the overall agreement, then domains from the front until none is left."""
        first = (lambda sections: send(("first", sections))) if self._on_overall is not None else None
        send(("overall", self._agreement.overall(first)))
        while (at := self._claims.from_front()) is not None:
            send((at, self._agreement.domain_summary(self._domains[at])))

    def _received(self, item: tuple[str | int, Any]) -> None:
        """On the reader thread: keep what came; hand the first sections over at once."""
        key, value = item
        if key == "first":
            if self._on_overall is not None:
                self._on_overall(value)
        elif key == "overall":
            self._overall = value
        else:
            self._theirs[int(key)] = value

    def finish(self) -> dict[str, Any]:
        mine = {}
        while (at := self._claims.from_back()) is not None:
            mine[at] = self._agreement.domain_summary(self._domains[at])
        self._child.wait()
        if self._overall is None:
            raise alongside.AlongsideLost("the report's process alongside its build sent no overall agreement")
        done = {**self._theirs, **mine}
        by_domain = (
            {str(domain): done[at] for at, domain in enumerate(self._domains)}
            if self._agreement.options.by_domain
            else None
        )
        return {**self._overall, "by_domain": by_domain}

    def cancel(self) -> None:
        self._child.cancel()


def start(agreement: AgreementInputs, on_overall: Callable[[dict[str, Any]], None] | None) -> AgreementBeside:
    """Start the agreement sections of a build (``on_overall`` as in ``AgreementInputs.overall``, perhaps called from
    another thread than the build's); put ``so_far`` in the report now and ``finish()`` at its end."""
    if alongside.forks(agreement.n_items):
        try:
            return _Forked(agreement, on_overall)
        except OSError as error:  # no fork (out of processes or memory) or no shared lock (no /dev/shm): threads
            logger.warning("the report's agreement is computed on threads: no process alongside (%s)", error)
    return _Threaded(agreement, on_overall)

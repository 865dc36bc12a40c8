"""What bounds a soak and how its load changes: `gangstorm soak`'s --window-s, --until, --windows
and --churn-schedule, checked to one line naming the flag. Pure: the wall clock is passed in.

A soak is cut into windows of --window-s wall seconds, window 1 starting when the soak does.
It ends after --windows windows, or at --until (the last window then ends at --until and is
shorter), whichever comes first; with neither it runs until SIGINT. The churn schedule gives the
churn multiplier (the scenario's workload.churn_multiplier, the quantity `gangstorm ceiling`
reports) from a time into the soak on; a window offers the churn in force when it starts.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from loadgen.model.errors import UserError

MIN_WINDOW_S = 5.0                # a window holds at least a few samples and scrapes
MAX_WINDOW_S = 24 * 3600.0
MAX_WINDOWS = 1_000_000
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")


class SoakInputError(UserError):
    """A bad soak flag: one line naming it, exit status 2."""

    def __init__(self, flag: str, message: str):
        super().__init__(f"{flag}: {message}")


def duration_s(text: str, flag: str) -> float:
    """'90', '90s', '20m', '1h30m', '1.5h' -> seconds (finite, > 0)."""
    t = str(text).strip().lower()
    m = _DURATION.match(t) if t else None
    if m is None or not any(m.groups()):
        raise SoakInputError(flag, f"expected a duration such as 90s, 20m or 1h30m, got {text!r}")
    h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    total = h * 3600 + mi * 60 + s
    if not math.isfinite(total) or total <= 0:
        raise SoakInputError(flag, f"expected a duration above zero, got {text!r}")
    return total


def window_seconds(text: str | float) -> float:
    flag = "--window-s"
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise SoakInputError(flag, f"expected seconds (a number), got {text!r}") from None
    if not math.isfinite(v) or not MIN_WINDOW_S <= v <= MAX_WINDOW_S:
        raise SoakInputError(flag, f"expected seconds from {MIN_WINDOW_S:g} to {MAX_WINDOW_S:g}, got {text!r}")
    return v


def window_count(text: str | int) -> int:
    flag = "--windows"
    s = str(text).strip()
    if not (s.isascii() and s.isdigit()) or not 1 <= int(s) <= MAX_WINDOWS:
        raise SoakInputError(flag, f"expected a whole number of windows from 1 to {MAX_WINDOWS:,}, got {text!r}")
    return int(s)


def until_seconds(text: str, now: datetime) -> float:
    """Seconds from `now` (an aware datetime) to --until: a duration (20m, 1h30m), a time of day
    (HH:MM[:SS], today, in now's time zone) or an ISO 8601 date and time (no zone: now's zone)."""
    flag = "--until"
    t = str(text).strip()
    if _DURATION.match(t.lower()) and any(_DURATION.match(t.lower()).groups()):
        return duration_s(t, flag)
    m = _CLOCK.match(t)
    try:
        if m:
            hh, mm, ss = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
            at = now.replace(hour=hh, minute=mm, second=ss, microsecond=0)
        else:
            at = datetime.fromisoformat(t.replace("Z", "+00:00").replace("z", "+00:00"))
            if at.tzinfo is None:
                at = at.replace(tzinfo=now.tzinfo)
    except ValueError:
        raise SoakInputError(flag, f"expected a duration (20m, 1h30m), a time (HH:MM) or a date and time "
                                   f"(2026-12-06T03:00:00Z), got {text!r}") from None
    left = (at - now) / timedelta(seconds=1)
    if left <= 0:
        raise SoakInputError(flag, f"{text!r} is in the past (now {now.isoformat(timespec='seconds')})")
    return left


@dataclass(frozen=True)
class ChurnSchedule:
    """(seconds into the soak, churn multiplier) steps, the first at 0."""
    steps: tuple[tuple[float, float], ...]

    def at(self, t: float) -> float:
        churn = self.steps[0][1]
        for since, c in self.steps:
            if since <= t:
                churn = c
        return churn

    def as_list(self) -> list[dict]:
        return [{"from_s": s, "churn_multiplier": c} for s, c in self.steps]


def churn_schedule(text: str | None, default: float) -> ChurnSchedule:
    """'0:400,10m:2000' (the 'x' after a multiplier is optional); None: the scenario's churn throughout."""
    flag = "--churn-schedule"
    if text is None:
        return ChurnSchedule(((0.0, float(default)),))
    steps = []
    for part in str(text).split(","):
        at, sep, value = part.strip().partition(":")
        if not sep:
            raise SoakInputError(flag, f"expected TIME:MULTIPLIER[,TIME:MULTIPLIER...] such as 0:400,10m:2000, "
                                       f"got {part.strip()!r}")
        since = 0.0 if at.strip() in ("0", "0s") else duration_s(at, flag)
        v = value.strip().lower().removesuffix("x")
        try:
            churn = float(v)
        except ValueError:
            churn = math.nan
        if not math.isfinite(churn) or churn <= 0:
            raise SoakInputError(flag, f"expected a churn multiplier above zero, got {value.strip()!r}")
        if steps and since <= steps[-1][0]:
            raise SoakInputError(flag, f"expected increasing times, got {at.strip()!r} after "
                                       f"{steps[-1][0]:g} s")
        steps.append((since, churn))
    if steps[0][0] != 0.0:
        raise SoakInputError(flag, f"expected the first step at 0 (the churn the soak starts with), got "
                                   f"{str(text).split(',')[0].strip()!r}")
    return ChurnSchedule(tuple(steps))


@dataclass(frozen=True)
class SoakBounds:
    """Window length and the two optional bounds, in seconds from the soak's start."""
    window_s: float
    windows: int | None = None
    until_s: float | None = None

    def window(self, k: int) -> tuple[float, float] | None:
        """[start, end) of window k (1-based), or None once the soak is over."""
        if self.windows is not None and k > self.windows:
            return None
        start, end = (k - 1) * self.window_s, k * self.window_s
        if self.until_s is not None:
            if start >= self.until_s:
                return None
            end = min(end, self.until_s)
        return start, end

    @property
    def bounded(self) -> bool:
        return self.windows is not None or self.until_s is not None

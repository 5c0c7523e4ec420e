"""Reference fire times from cronsim (Debian cron semantics) for the cairn differential test.

Reads JSON lines on stdin, one case per line:
    {"id": 7, "expr": "0 9 * * 1-5", "tz": "America/New_York",
     "from": "2026-03-07T12:00:00Z", "count": 6}
and writes one JSON line per case on stdout:
    {"id": 7, "next": ["2026-03-09T13:00:00Z", ...], "pristine": [...]}   or
    {"id": 7, "error": "Bad day-of-month"}

"next" is what cairn must produce. It is cronsim's answer with one documented
adjustment: cronsim applies Debian's fixed-time DST rule (a skipped local time
fires at the end of the gap, a repeated one only on its first pass) to
5-field expressions only; cairn applies it to every expression whose minute
and hour fields are fixed, seconds field or not, so that `0 30 2 * * *` and
`30 2 * * *` behave the same. For those 6-field expressions "next" comes from
cronsim's own algorithm with the rule switched on (and a skipped time moved
to the exact end of the gap, second 0); "pristine" is cronsim unmodified, so
the test can count how often the adjustment mattered.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from datetime import timedelta as td
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError
from cronsim.cronsim import is_imaginary

UTC = timezone.utc


class FixedTimeSim(CronSim):
    """cronsim with the Debian fixed-time DST rule also for 6-field expressions."""

    def __init__(self, expr: str, dt: datetime):
        super().__init__(expr, dt)
        parts = expr.upper().split()
        fixed = not parts[1].startswith("*") and not parts[2].startswith("*")
        if self.fixup_tz is None and fixed and dt.tzinfo not in (None, UTC):
            self.fixup_tz = dt.tzinfo
            self.dt = self.dt.replace(tzinfo=None)

    def __next__(self) -> datetime:
        # Forward iteration of CronSim.__next__, except that a skipped time is
        # moved to the end of the gap at second 0 (cronsim keeps the seconds,
        # which only 6-field expressions can have).
        self.tick()
        self.advance()
        if self.fixup_tz:
            result = self.dt.replace(tzinfo=self.fixup_tz, fold=0)
            moved = False
            while is_imaginary(result):
                self.dt += td(minutes=1)
                result = self.dt.replace(tzinfo=self.fixup_tz)
                moved = True
            if moved:
                self.dt = self.dt.replace(second=0)
                result = self.dt.replace(tzinfo=self.fixup_tz)
            return result
        return self.dt


def utc_text(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fire_times(cls: type[CronSim], expr: str, start: datetime, count: int) -> list[str]:
    out = []
    it = cls(expr, start)
    for _ in range(count):
        try:
            out.append(utc_text(next(it)))
        except StopIteration:
            break
    return out


def answer(case: dict) -> dict:
    zone = ZoneInfo(case["tz"])
    start = datetime.fromisoformat(case["from"].replace("Z", "+00:00")).astimezone(zone)
    expr, count = case["expr"], case["count"]
    try:
        pristine = fire_times(CronSim, expr, start, count)
        adjusted = pristine
        if len(expr.split()) == 6:
            adjusted = fire_times(FixedTimeSim, expr, start, count)
    except CronSimError as err:
        return {"id": case["id"], "error": str(err)}
    return {"id": case["id"], "next": adjusted, "pristine": pristine}


def main() -> None:
    out = sys.stdout
    for line in sys.stdin:
        line = line.strip()
        if line:
            out.write(json.dumps(answer(json.loads(line))) + "\n")
    out.flush()


if __name__ == "__main__":
    main()

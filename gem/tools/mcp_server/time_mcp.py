"""GEM's example time server: ``python -m gem.tools.mcp_server.time_mcp [--transport stdio|streamable-http]``.

The same tools as GEM's (``current_time``, ``relative_time``, ``days_in_month``, ``get_timestamp``,
``convert_time``, ``get_week_year``), with the same arguments, so GEM's MCP examples find what they call.
Times read ``YYYY-MM-DD HH:mm:ss[.SSS]`` in the server's local zone unless a zone is named.
"""

from __future__ import annotations

import argparse
import calendar
from datetime import datetime, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastmcp import FastMCP

app = FastMCP("mcp-time-server")

# Moment.js tokens GEM's server accepts, longest first so "YYYY" is not read as two "YY".
_TOKENS = [("YYYY", "%Y"), ("YY", "%y"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S"), ("MM", "%m"), ("DD", "%d"), ("A", "%p")]


def _zone(name: str | None) -> tzinfo:
    """The IANA zone ``name``; the local zone when it is empty or unknown (as GEM's server does)."""
    local = datetime.now().astimezone().tzinfo  # astimezone() always sets one
    assert local is not None
    try:
        return ZoneInfo(name) if name else local
    except (ZoneInfoNotFoundError, ValueError):
        return local


def _strftime(moment_format: str) -> str:
    out = moment_format.replace("h", "%-I")
    for token, directive in _TOKENS:
        out = out.replace(token, directive)
    return out


def _parse(text: str, zone: tzinfo | None = None) -> datetime:
    main, _, fraction = text.partition(".")
    moment = datetime.strptime(main, "%Y-%m-%d %H:%M:%S")
    if fraction:
        moment = moment.replace(microsecond=int((fraction + "000000")[:6]))
    return moment.replace(tzinfo=zone or _zone(None))


def _day(text: str | None) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d") if text else datetime.now()


# GEM's names for the helpers above: its own tests import them from this module.
def _moment_to_strftime(fmt: str) -> str:
    """A Moment.js-like format as a ``strftime`` format."""
    return _strftime(fmt)


def _parse_dt(time_str: str) -> datetime:
    """'YYYY-MM-DD HH:mm:ss[.SSS]' in the local zone."""
    return _parse(time_str)


def _parse_date(date_str: str) -> datetime:
    """'YYYY-MM-DD' at midnight in the local zone."""
    return datetime.strptime(date_str, "%Y-%m-%d").replace(tzinfo=_zone(None))


@app.tool
def current_time(format: str = "YYYY-MM-DD HH:mm:ss", timezone: str | None = None) -> str:  # noqa: A002 (GEM's names)
    """The current date/time in a Moment.js-like ``format`` and an optional IANA ``timezone``."""
    now = datetime.now(tz=_zone(timezone))
    try:
        return now.strftime(_strftime(format))
    except ValueError:
        return now.strftime("%Y-%m-%d %H:%M:%S")


@app.tool
def relative_time(time: str) -> str:
    """How far ``time`` ('YYYY-MM-DD HH:mm:ss') is from now, e.g. 'in 3 days' or '2 hours ago'."""
    seconds = int((_parse(time) - datetime.now(tz=_zone(None))).total_seconds())
    value, unit = abs(seconds), "seconds"
    for size, name in ((60, "minutes"), (60, "hours"), (24, "days"), (30, "months"), (12, "years")):
        if value < size:
            break
        value, unit = value // size, name
    return f"in {value} {unit}" if seconds > 0 else f"{value} {unit} ago"


@app.tool
def days_in_month(date: str | None = None) -> str:
    """The number of days in the month of ``date`` ('YYYY-MM-DD'; this month if omitted)."""
    day = _day(date)
    return str(calendar.monthrange(day.year, day.month)[1])


@app.tool
def get_timestamp(time: str) -> str:
    """The Unix timestamp in milliseconds of ``time`` ('YYYY-MM-DD HH:mm:ss.SSS', local)."""
    return str(int(_parse(time).astimezone(timezone.utc).timestamp() * 1000))


@app.tool
def convert_time(sourceTimezone: str, targetTimezone: str, time: str) -> str:  # noqa: N803 (GEM's names)
    """``time`` ('YYYY-MM-DD HH:mm:ss') read in ``sourceTimezone``, shown in ``targetTimezone``."""
    return _parse(time, _zone(sourceTimezone)).astimezone(_zone(targetTimezone)).strftime("%Y-%m-%d %H:%M:%S")


@app.tool
def get_week_year(date: str | None = None) -> str:
    """The week of the year (weeks start on Monday) and the ISO week of ``date`` ('YYYY-MM-DD'; today if omitted)."""
    day = _day(date)
    return f"week: {int(day.strftime('%W'))}, isoWeek: {day.isocalendar().week}"


def main() -> None:
    """Serve over stdio or streamable HTTP (GEM's options and defaults)."""
    parser = argparse.ArgumentParser(description="Time MCP Server")
    parser.add_argument("--transport", choices=["stdio", "http", "streamable-http"], default="streamable-http")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--path", default="/mcp")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args()
    if args.transport == "stdio":
        app.run(transport="stdio")
    else:
        app.run(transport="streamable-http", host=args.host, port=args.port, path=args.path, log_level=args.log_level.lower())


if __name__ == "__main__":
    main()

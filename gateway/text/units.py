"""Units of measurement: what follows a number, as a dimension and a factor.

:func:`read_unit` reads the unit written right after a number (``"330 m"``,
``"330 metres"``, ``"3,000 litres per hour"``, ``"100 km/h"``, ``"28 days"``,
``"14-inch"``, ``"5 business days"``) and returns a :class:`Unit`: its dimension
(``length``, ``mass``, ``time``, ``volume``, …; a rate is ``"volume/time"``) and the
factor to that dimension's base unit, so quantities stated in different units can
be compared (``330 m`` = ``1,083 feet``; ``3,000 l/h`` = ``50 litres per minute``).

A word after a number that is not a unit is a *count noun* (``"15 patients"``,
``"8 persons"``): :func:`read_unit` returns ``None`` and the caller treats the
value as a count. Pure functions, tables built once at import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Unit", "factors_of", "read_unit", "unit_named"]


@dataclass(frozen=True, slots=True)
class Unit:
    """A unit: ``value * factor`` is the value in the dimension's base unit."""

    dim: str
    """``length``, ``mass``, ``time``, ``volume``, … or ``"num/den"`` for a rate."""
    factor: float
    name: str
    """The canonical symbol (``"m"``, ``"kg"``, ``"l/h"``), for messages."""
    fuzzy: bool = False
    """Calendar months and years, US tons and gallons: conversions are approximate."""

    @property
    def base_dim(self) -> str:
        """The dimension without a rate's denominator (``"volume/time"`` -> ``volume``)."""
        return self.dim.split("/", 1)[0]

    @property
    def per(self) -> str | None:
        """The denominator's dimension of a rate, else ``None``."""
        return self.dim.split("/", 1)[1] if "/" in self.dim else None


_DAY = 86400.0
_YEAR = 365.2425 * _DAY
# (dimension, factor, canonical name, fuzzy, surface forms: case-sensitive symbols | words)
_TABLE: tuple[tuple[str, float, str, bool, str, str], ...] = (
    ("length", 1e-9, "nm", False, "nm", "nanometre nanometres nanometer nanometers"),
    ("length", 1e-6, "µm", False, "µm μm", "micrometre micrometres micrometer micrometers micron microns"),
    ("length", 1e-3, "mm", False, "mm", "millimetre millimetres millimeter millimeters"),
    ("length", 1e-2, "cm", False, "cm", "centimetre centimetres centimeter centimeters"),
    ("length", 1.0, "m", False, "m", "metre metres meter meters"),
    ("length", 1e3, "km", False, "km", "kilometre kilometres kilometer kilometers"),
    ("length", 0.0254, "in", False, "″ \"", "inch inches"),
    ("length", 0.3048, "ft", False, "ft ′", "foot feet"),
    ("length", 0.9144, "yd", False, "yd", "yard yards"),
    ("length", 1609.344, "mi", False, "mi", "mile miles"),
    ("mass", 1e-6, "µg", False, "µg μg mcg", "microgram micrograms"),
    ("mass", 1e-3, "mg", False, "mg", "milligram milligrams milligramme milligrammes"),
    ("mass", 1.0, "g", False, "g", "gram grams gramme grammes"),
    ("mass", 1e3, "kg", False, "kg kgs", "kilogram kilograms kilogramme kilogrammes kilo kilos"),
    ("mass", 1e6, "t", False, "", "tonne tonnes"),
    ("mass", 1e6, "t", True, "", "ton tons"),
    ("mass", 453.59237, "lb", False, "lb lbs", "pound pounds"),
    ("mass", 28.349523125, "oz", False, "oz", "ounce ounces"),
    ("time", 1e-3, "ms", False, "ms", "millisecond milliseconds"),
    ("time", 1.0, "s", False, "s sec secs", "second seconds"),
    ("time", 60.0, "min", False, "min mins", "minute minutes"),
    ("time", 3600.0, "h", False, "h hr hrs", "hour hours"),
    ("time", _DAY, "d", False, "", "day days"),
    ("time", 7 * _DAY, "wk", False, "wk wks", "week weeks"),
    ("time", 14 * _DAY, "fortnight", False, "", "fortnight fortnights"),
    ("time", _YEAR / 12, "mo", True, "", "month months"),
    ("time", _YEAR, "yr", True, "yr yrs", "year years"),
    ("time", 10 * _YEAR, "decade", True, "", "decade decades"),
    ("time", 100 * _YEAR, "century", True, "", "century centuries"),
    ("volume", 1e-3, "ml", False, "ml mL", "millilitre millilitres milliliter milliliters"),
    ("volume", 1e-2, "cl", False, "cl cL", "centilitre centilitres"),
    ("volume", 1.0, "l", False, "l L", "litre litres liter liters"),
    ("volume", 3.785411784, "gal", True, "gal", "gallon gallons"),
    ("volume", 1e3, "m³", False, "m³ m3", ""),
    ("area", 1e-4, "cm²", False, "cm² cm2", ""),
    ("area", 1.0, "m²", False, "m² m2 sqm", ""),
    ("area", 1e6, "km²", False, "km² km2", ""),
    ("area", 1e4, "ha", False, "ha", "hectare hectares"),
    ("area", 4046.8564224, "acre", False, "", "acre acres"),
    ("power", 1e-3, "mW", False, "mW", "milliwatt milliwatts"),
    ("power", 1.0, "W", False, "W", "watt watts"),
    ("power", 1e3, "kW", False, "kW", "kilowatt kilowatts"),
    ("power", 1e6, "MW", False, "MW", "megawatt megawatts"),
    ("power", 1e9, "GW", False, "GW", "gigawatt gigawatts"),
    ("power", 745.7, "hp", True, "hp", "horsepower"),
    ("energy", 1.0, "Wh", False, "Wh", ""),
    ("energy", 1e3, "kWh", False, "kWh", ""),
    ("energy", 1e6, "MWh", False, "MWh", ""),
    ("energy", 1 / 3600, "J", False, "J", "joule joules"),
    ("energy", 1e3 / 3600, "kJ", False, "kJ", "kilojoule kilojoules"),
    ("energy", 4.184 / 3.6, "kcal", True, "kcal", "calorie calories kilocalorie kilocalories"),
    ("voltage", 1e-3, "mV", False, "mV", "millivolt millivolts"),
    ("voltage", 1.0, "V", False, "V", "volt volts"),
    ("voltage", 1e3, "kV", False, "kV", "kilovolt kilovolts"),
    ("current", 1e-3, "mA", False, "mA", "milliamp milliamps milliampere milliamperes"),
    ("current", 1.0, "A", False, "A", "amp amps ampere amperes"),
    ("charge", 1e-3, "mAh", False, "mAh", ""),
    ("charge", 1.0, "Ah", False, "Ah", ""),
    ("frequency", 1.0, "Hz", False, "Hz", "hertz"),
    ("frequency", 1e3, "kHz", False, "kHz", "kilohertz"),
    ("frequency", 1e6, "MHz", False, "MHz", "megahertz"),
    ("frequency", 1e9, "GHz", False, "GHz", "gigahertz"),
    ("rotation/time", 1 / 60, "rpm", False, "rpm", ""),
    ("torque", 1.0, "Nm", False, "Nm N·m", ""),
    ("force", 1.0, "N", False, "N", "newton newtons"),
    ("pressure", 1.0, "Pa", False, "Pa", "pascal pascals"),
    ("pressure", 1e3, "kPa", False, "kPa", ""),
    ("pressure", 1e5, "bar", False, "bar", "bar bars"),
    ("pressure", 6894.757, "psi", False, "psi", ""),
    ("data", 1.0, "B", False, "B", "byte bytes"),
    ("data", 1e3, "kB", False, "kB KB", "kilobyte kilobytes"),
    ("data", 1e6, "MB", False, "MB", "megabyte megabytes"),
    ("data", 1e9, "GB", False, "GB", "gigabyte gigabytes"),
    ("data", 1e12, "TB", False, "TB", "terabyte terabytes"),
    ("data", 2**30, "GiB", False, "GiB", "gibibyte gibibytes"),
    ("data", 2**40, "TiB", False, "TiB", ""),
    ("bitrate", 1e6, "Mbps", False, "Mbps Mbit/s Mb/s", ""),
    ("bitrate", 1e9, "Gbps", False, "Gbps Gbit/s Gb/s", ""),
    ("length/time", 1000 / 3600, "km/h", False, "km/h kph kmh", ""),
    ("length/time", 1609.344 / 3600, "mph", False, "mph", ""),
    ("length/time", 1.0, "m/s", False, "m/s", ""),
    ("length/time", 0.514444, "kn", False, "kn kt kts", "knot knots"),
    ("temperature", 1.0, "°C", False, "°C ℃ ºC", "celsius centigrade"),
    ("temperature_f", 1.0, "°F", False, "°F ℉ ºF", "fahrenheit"),
    ("temperature_k", 1.0, "K", False, "", "kelvin"),
    ("currency:$", 1.0, "$", False, "USD US$", "dollar dollars"),
    ("currency:$", 0.01, "¢", False, "¢", "cent cents"),
    ("currency:€", 1.0, "€", False, "EUR", "euro euros"),
    ("currency:£", 1.0, "£", False, "GBP", "sterling"),
    ("currency:£", 0.01, "p", False, "", "pence penny"),
    ("currency:¥", 1.0, "¥", False, "JPY", "yen"),
    ("currency:CHF", 1.0, "CHF", False, "CHF", "franc francs"),
    ("percent", 1.0, "%", False, "%", "percent per-cent pct"),
)

_SYMBOLS: dict[str, Unit] = {}
_WORDS: dict[str, Unit] = {}
for _dim, _factor, _name, _fuzzy, _symbols, _words in _TABLE:
    _unit = Unit(_dim, _factor, _name, _fuzzy)
    for _s in _symbols.split():
        _SYMBOLS[_s] = _unit
    for _w in _words.split():
        _WORDS[_w] = _unit
_SYMBOLS["%"] = _WORDS["percent"]

_TIME_UNITS = {u.name: u for u in _WORDS.values() if u.dim == "time"}
_FACTORS: dict[str, tuple[float, ...]] = {
    dim: tuple(sorted({row[1] for row in _TABLE if row[0] == dim}))
    for dim in dict.fromkeys(row[0] for row in _TABLE)}


def factors_of(dim: str) -> tuple[float, ...]:
    """The factors of the table's units of ``dim`` (``"time"``: 0.001, 1, 60, 3600, …),
    ascending; empty for a dimension it has no units of."""
    return _FACTORS.get(dim, ())

# Words allowed between a number and its unit ("5 business days", "3 calendar months").
_MODIFIERS = frozenset(
    "business working calendar full consecutive whole additional extra more further "
    "clear straight square cubic".split())
_SQUARE = {"length": ("area", 2), "area": ("area", 1)}

# "°C" / "° C" / "degrees Celsius" / "degrees" / "deg C".
_DEGREES = re.compile(r"\s?(?:°|º|deg(?:rees?)?\.?)\s?([CFK])\b|\s?(?:degrees?|°|º)\s+"
                      r"(celsius|centigrade|fahrenheit)\b|\s?(?:°|º)|\s+degrees?\b", re.IGNORECASE)
_TOKEN = re.compile(r"[ \t\u00a0]?-?[ \t\u00a0]?([A-Za-zµμ°℃℉ºΩ$€£¥¢'′″\"][A-Za-z0-9µμ²³·/$€£¥]*)")
_PER = re.compile(r"\s*(?:(?:per|an|a|each|every)\b|/)\s*(?=\S)", re.IGNORECASE)


def unit_words(dims: tuple[str, ...]) -> frozenset[str]:
    """Every lower-case word or symbol :func:`unit_named` reads as a unit of one of
    ``dims`` ("hour", "hours", "h", "metre", …): a set test before a pattern looks for them."""
    return frozenset([*(w for w, u in _WORDS.items() if u.dim in dims),
                      *(s for s, u in _SYMBOLS.items() if u.dim in dims and s == s.lower())])


def unit_named(word: str) -> Unit | None:
    """The unit a single symbol or word names (``"kg"``, ``"metres"``), else ``None``."""
    got = _SYMBOLS.get(word)
    if got is None:
        got = _WORDS.get(word.lower())
    return got


def _one(text: str, pos: int, *, after_per: bool = False) -> tuple[Unit, int] | None:
    """One unit (no rate) starting at ``pos`` (after optional space / hyphen)."""
    deg = _DEGREES.match(text, pos)
    if deg is not None:
        letter = (deg.group(1) or deg.group(2) or "").lower()
        if letter.startswith(("f",)):
            return _SYMBOLS["°F"], deg.end()
        if letter in ("k", "kelvin"):
            return _SYMBOLS["K"], deg.end()
        return _SYMBOLS["°C"], deg.end()
    m = _TOKEN.match(text, pos)
    if m is None:
        return None
    word = m.group(1)
    end = m.end()
    if word.endswith("."):
        word = word[:-1]
    # A symbol glued to a slash is a rate written as one token ("km/h", "m/s", "l/h").
    unit = _SYMBOLS.get(word)
    if unit is None and "/" in word:
        num, _, den = word.partition("/")
        nu, du = _SYMBOLS.get(num) or _WORDS.get(num.lower()), _den_unit(den)
        if nu is not None and du is not None:
            return _rate(nu, du), end
        if nu is not None:  # "1,800 rpm/" or "kg/" odd: the numerator only
            return nu, m.start(1) + len(num)
        return None
    if unit is None:
        low = word.lower()
        unit = _WORDS.get(low)
        if unit is None and low in _MODIFIERS and not after_per:
            nxt = _one(text, end)
            if nxt is not None:
                return nxt
            return None
        if unit is None and low in ("square", "sq") and not after_per:
            nxt = _one(text, end)
            if nxt is not None and nxt[0].dim == "length":
                base = nxt[0]
                return Unit("area", base.factor ** 2, base.name + "²"), nxt[1]
            return None
        if unit is None:
            return None
        # A lone capital letter that is a symbol only in upper case ("A", "V", "W") was
        # handled above; here words only.
    elif len(word) == 1 and word in "mgsAVWNBKLl" and end < len(text) and text[end] == "'":
        return None  # "5 A's", "the 3 m's": not units
    # "tall", "to", "in": not units; a symbol must end at a word boundary.
    if end < len(text) and (text[end].isalnum()):
        return None
    return unit, end


def _den_unit(word: str) -> Unit | None:
    if not word:
        return None
    got = _SYMBOLS.get(word) or _WORDS.get(word.lower())
    if got is None and word.lower() in ("hr", "hour", "sec", "min", "day", "yr"):
        got = _WORDS.get(word.lower()) or _SYMBOLS.get(word.lower())
    return got


def _rate(num: Unit, den: Unit) -> Unit:
    if "/" in num.dim:  # "rpm per ..." : keep the first rate
        return num
    return Unit(f"{num.dim}/{den.dim}", num.factor / den.factor, f"{num.name}/{den.name}",
                num.fuzzy or den.fuzzy)


def read_unit(text: str, pos: int) -> tuple[Unit, int] | None:
    """The unit written at ``text[pos:]`` (right after a number) and where it ends.

    Handles one space or a hyphen before it (``"14-inch"``), symbols and words in
    singular or plural, a modifier word in between (``"5 business days"``), degrees,
    and rates: ``"litres per hour"``, ``"litres an hour"``, ``"km/h"``, ``"mg/day"``.
    ``None`` when the next word is not a unit (a count noun, or nothing).
    """
    if pos >= len(text):
        return None
    first = _one(text, pos)
    if first is None:
        return None
    unit, end = first
    if "/" in unit.dim or unit.dim == "percent" or unit.dim.startswith(("currency", "temp")):
        return unit, end
    per = _PER.match(text, end)
    if per is not None:
        word = per.group(0).strip().lower()
        den = _one(text, per.end(), after_per=True)
        # "a"/"an" only before a time unit ("litres an hour"), never "5 kg a piece".
        if den is not None and (word not in ("a", "an", "each", "every")
                                or den[0].dim == "time"):
            return _rate(unit, den[0]), den[1]
    return unit, end


def time_unit(name: str) -> Unit:
    """The time unit with canonical name ``name`` (``"d"``, ``"wk"``, ``"mo"``, …)."""
    return _TIME_UNITS[name]

"""The manifest's credit rules: the license a bundle of the claim is given under, its authors and
its publisher.

``license`` is one identifier of the SPDX License List (https://spdx.org/licenses/), checked
against the copy that ``license-expression`` ships and keeps current; ``authors`` are names,
each with an optional ORCID iD and an optional affiliation (an organisation's name, with its
optional ROR id); ``publisher`` is the organisation that publishes the bundle (a name and an
optional https URL). ``manifest.rules`` re-exports these rules: the light schema names every
field rule by its place there. The models are in ``manifest.credit_spec``.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

SPDX_LICENSES = "https://spdx.org/licenses/"
ORCID_RE = re.compile(r"https://orcid\.org/([0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{3}[0-9X])")
# a ROR id (https://ror.org/about/faqs/#what-is-a-ror-identifier): 0, 6 Crockford base32, 2 digits
ROR_RE = re.compile(r"https://ror\.org/0[0-9a-hjkmnp-tv-z]{6}[0-9]{2}")
WEB_URL_RE = re.compile(r"https://[^\s\x00-\x1f\x7f/]+(?:/[^\s\x00-\x1f\x7f]*)?")
MAX_AUTHOR_CHARS = 256
MAX_WEB_URL_CHARS = 2048
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


@functools.cache
def _index_file() -> Path | None:
    """The license index ``license-expression`` ships, found without importing the package
    (the 25 ms import is not paid); None where its layout changed."""
    import importlib.util

    spec = importlib.util.find_spec("license_expression")
    where = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in where:
        path = Path(folder) / "data" / "scancode-licensedb-index.json"
        if path.is_file():
            return path
    return None


def _license_index() -> list[dict[str, Any]]:
    """The license index ``license-expression`` ships (its ``get_license_index()``), read from
    the package's data file: ``validate`` of a good manifest stays as fast as pydantic-core
    alone (bench/scale)."""
    import json

    path = _index_file()
    if path is not None:
        data: list[dict[str, Any]] = json.loads(path.read_bytes())
        return data
    from license_expression import get_license_index  # its layout changed: ask it

    index: list[dict[str, Any]] = get_license_index()
    return index


def _current(entry: dict[str, Any]) -> str | None:
    """The entry's SPDX id when it is a license of the list (no exception, no deprecated or
    LicenseRef- id), else None."""
    key = entry.get("spdx_license_key")
    if not isinstance(key, str) or not key or key.startswith("LicenseRef-"):
        return None
    return None if entry.get("is_exception") or entry.get("is_deprecated") else key


@functools.cache
def spdx_ids() -> tuple[dict[str, str], dict[str, str]]:
    """(lower-case id → id, lower-case old id → the id that replaced it) of the SPDX License
    List, exceptions and deprecated ids left out (ids match case-insensitively: SPDX, annex B)."""
    current: dict[str, str] = {}
    old: dict[str, str] = {}
    for entry in _license_index():
        key = _current(entry)
        if key is not None:
            current[key.lower()] = key
            for alias in entry.get("other_spdx_license_keys") or ():
                if not alias.startswith("LicenseRef-") and " " not in alias:
                    old[alias.lower()] = key
    return current, old


@functools.cache
def _index_text() -> tuple[bytes, bytes] | None:
    """The index file's bytes and the same in lower case (``_listed``), or None."""
    path = _index_file()
    if path is None:
        return None
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    return raw, raw.lower()


@functools.lru_cache(maxsize=1024)  # a submission gives the same id again and again
def _listed(v: str) -> str | None:
    """The id ``v`` names (any case) when the index lists it as a current license, found by
    parsing only its entry (the whole 1 MB index is 60 M instructions, 3 % of a 500-claim
    submit); None when not found so: ``spdx_ids`` then decides, as it always may
    (an entry this cannot cut out cleanly is left to it). tests/unit: the same answer as
    ``spdx_ids`` for every id of the index."""
    import json

    text = _index_text()
    if text is None or not v.isascii():
        return None
    raw, low = text
    needle = b'"spdx_license_key": ' + json.dumps(v.lower()).encode("ascii")
    at = low.find(needle)
    while at >= 0:
        start, end = raw.rfind(b"{", 0, at), raw.find(b"}", at)
        try:
            entry = json.loads(raw[start : end + 1]) if start >= 0 and end >= 0 else None
        except ValueError:
            return None
        if not isinstance(entry, dict):
            return None
        key = _current(entry)
        if key is not None and key.lower() == v.lower():
            return key
        at = low.find(needle, at + 1)
    return None


def valid_license(v: str) -> str:
    """One SPDX license id, as the SPDX License List writes it."""
    if any(c.isspace() or c in "()" for c in v):
        raise ValueError(
            "must be one SPDX license id, not an expression (no spaces): the bundle's RO-Crate"
            f" names one license, {SPDX_LICENSES}<id>"
        )
    if (key := _listed(v)) is not None:
        return key
    current, old = spdx_ids()
    if (key := current.get(v.lower())) is not None:
        return key
    if (new := old.get(v.lower())) is not None:
        raise ValueError(f"is an old SPDX id; write {new!r} ({SPDX_LICENSES}{new})")
    raise ValueError(
        "is not an SPDX license id (e.g. MIT, Apache-2.0, CC-BY-4.0, CC0-1.0; the list:"
        f" {SPDX_LICENSES})"
    )


def orcid_check_digit(digits: str) -> str:
    """The check character of an ORCID iD's first 15 digits (ISO 7064 MOD 11-2)."""
    total = 0
    for d in digits:
        total = (total + int(d)) * 2
    result = (12 - total % 11) % 11
    return "X" if result == 10 else str(result)


def valid_orcid(v: str) -> str:
    """An ORCID iD in its URL form, with a correct check digit."""
    m = ORCID_RE.fullmatch(v)
    if m is None:
        raise ValueError(
            "is not an ORCID iD: https://orcid.org/ and four groups of four digits, the last"
            " character a digit or X (e.g. https://orcid.org/0000-0002-1825-0097)"
        )
    digits = m.group(1).replace("-", "")
    if orcid_check_digit(digits[:15]) != digits[15]:
        raise ValueError("has a wrong check digit (ORCID's ISO 7064 MOD 11-2): a typo?")
    return v


def valid_author_name(v: str) -> str:
    """A name as it is to be credited, a person's or an organisation's: one line, not blank."""
    if not v.strip() or v.strip() != v:
        raise ValueError("must be a name, without surrounding spaces")
    if _CONTROL_RE.search(v):
        raise ValueError("must be a single line without control characters")
    if len(v) > MAX_AUTHOR_CHARS:
        raise ValueError(f"is {len(v)} characters; at most {MAX_AUTHOR_CHARS}")
    return v


def valid_ror(v: str) -> str:
    """An organisation's ROR id in its URL form (https://ror.org/05dxps055)."""
    if not ROR_RE.fullmatch(v):
        raise ValueError(
            "is not a ROR id: https://ror.org/ and 9 characters, 0 first and two digits last"
            " (e.g. https://ror.org/05dxps055; find yours at https://ror.org/)"
        )
    return v


def valid_web_url(v: str) -> str:
    """A web page's address: https://, a host, no spaces."""
    if len(v) > MAX_WEB_URL_CHARS or not WEB_URL_RE.fullmatch(v):
        raise ValueError(
            f"is not an https:// URL (a host, no spaces, at most {MAX_WEB_URL_CHARS} characters)"
        )
    return v


def credit_warnings(data: dict[str, Any], label: str) -> list[str]:
    """With ``authors`` (a claim being prepared for hand-over): each author without an
    affiliation, and no ``publisher``; the bundle's RO-Crate would lack them."""
    authors = data.get("authors") or ()
    out = [
        f"{label}: authors[{i}] ({a.get('name')}): no affiliation; the bundle's RO-Crate will not"
        " say which organisation the author belongs to; add `affiliation: <organisation>`"
        for i, a in enumerate(authors)
        if isinstance(a, dict) and not a.get("affiliation")
    ]
    if authors and not data.get("publisher"):
        out.append(
            f"{label}: publisher: not set; the bundle's RO-Crate will name no publisher; add"
            " `publisher: {name: <organisation>, url: https://…}` (who publishes the bundle)"
        )
    return out


def handover_warnings(data: Any, label: str) -> list[str]:
    """What a bundle of this valid manifest would lack: its license, what a reviewer could not
    find: the code's repository (``code.repo``), for each dataset where to get it (``url`` or
    ``doi``), and, when it names authors, their affiliations and the publisher."""
    if not isinstance(data, dict):
        return []
    code = data.get("code")
    out = []
    if not data.get("license"):
        out.append(
            f"{label}: license: not set; `pack` will need --license SPDX (a bundle says under"
            " which terms it may be used)"
        )
    if isinstance(code, dict) and not code.get("repo"):
        out.append(
            f"{label}: code.repo: not set; a bundle will say which commit but not where to get"
            " it; add the repository's URL (https://…)"
        )
    for i, d in enumerate(data.get("data") or ()):
        if isinstance(d, dict) and not d.get("url") and not d.get("doi"):
            out.append(
                f"{label}: data[{i}] ({d.get('name')}): neither url nor doi; a bundle will pin"
                " it but not say where to get it; add a permanent, citable location"
            )
    return out + credit_warnings(data, label)

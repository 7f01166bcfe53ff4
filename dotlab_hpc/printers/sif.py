"""The text ``inspect`` prints for people about one SIF image (pure; cli/ prints it)."""

from __future__ import annotations

from ..container.sif_types import GO_ZERO_TIME, SifImage, SifObject, utc_time


def _printable(text: str) -> str:
    """Escape control characters so a lying file cannot drive the terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _when(ts: int) -> str:
    if ts == GO_ZERO_TIME:
        return "unset (deterministic build)"
    t = utc_time(ts)
    return f"{ts} (out of range)" if t is None else t.replace(tzinfo=None).isoformat(" ") + " UTC"


def _link_text(o: SifObject) -> str:
    if o.link is None:
        return "-"
    return f"{o.link.id}{' (group)' if o.link.is_group else ''}"


def _signature_lines(image: SifImage) -> list[str]:
    """One line per signature object: what it signs, its hash and the signer's fingerprint.

    ``apptainer sign`` adds one Signature object per object group, linked to that group
    (sylabs/sif pkg/integrity); the signer is the OpenPGP key's fingerprint in the descriptor.
    Nothing here checks a signature: that is ``apptainer verify``'s work.
    """
    rows = [("ID", "SIGNS", "HASH", "SIGNER")]
    for o in image.objects:
        if (s := o.signature) is None:
            continue
        if o.link is None:
            signs = "nothing (no link)"
        else:
            signs = f"{'group' if o.link.is_group else 'object'} {o.link.id}"
        rows.append((str(o.id), signs, s.hash_type, s.fingerprint or "unknown (no fingerprint)"))
    if len(rows) == 1:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["", "signatures (not verified here: `apptainer verify` checks them)"]
    for r in rows:
        lines.append("  ".join(_printable(c).ljust(w) for c, w in zip(r, widths, strict=True)))
    return [line.rstrip() for line in lines]


def format_summary(image: SifImage) -> str:
    """A short aligned summary: header facts, one line per object, the signatures, the digest."""
    h = image.header
    used = len(image.objects)
    signatures = sum(1 for o in image.objects if o.signature is not None)
    facts = [
        ("file", f"{image.path} ({image.file_size} bytes)"),
        ("digest", image.digest or "not computed"),
        ("version", h.version),
        ("arch", h.arch if h.arch != "unknown" else f"unknown ({h.arch_code!r})"),
        ("id", str(h.id)),
        ("created", _when(h.created_at)),
        ("modified", _when(h.modified_at)),
        (
            "descriptors",
            f"{used} used, {h.descriptors_free} free of {h.descriptors_total}"
            f" (table at byte {h.descriptors_offset}, {h.descriptors_size} bytes)",
        ),
        ("data", f"at byte {h.data_offset}, {h.data_size} bytes"),
    ]
    if h.launch_script:
        facts.insert(3, ("launch script", h.launch_script.rstrip("\n")))
    if image.deffile is not None:
        facts.append(("definition", f"{len(image.deffile)} bytes (`inspect --def` prints it)"))
    else:
        facts.append(("definition", "none embedded"))
    facts.append(("signed", f"{signatures} signature object(s)" if signatures else "no"))
    width = max(len(k) for k, _ in facts)
    lines = [f"{k:<{width}}  {_printable(v)}" for k, v in facts]

    rows = [("ID", "GROUP", "LINK", "OFFSET", "SIZE", "TYPE", "NAME")]
    for o in image.objects:
        label = o.type_label
        if o.signature and o.signature.fingerprint:
            label += f" {o.signature.fingerprint}"
        if o.oci_digest:
            label += f" {o.oci_digest}"
        rows.append(
            (
                str(o.id),
                "-" if o.group is None else str(o.group),
                _link_text(o),
                str(o.offset),
                str(o.size),
                _printable(label),
                _printable(o.name),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines.append("")
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    if not image.objects:
        lines.append("(no objects)")
    lines += _signature_lines(image)
    return "\n".join(lines) + "\n"

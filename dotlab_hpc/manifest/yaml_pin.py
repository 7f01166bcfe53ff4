"""Where ``build --pin`` writes the digest in the manifest's text: found from the YAML parser's
own marks (a JSON manifest is YAML too), so that every other byte stays as the author wrote it.

Apart from ``manifest.pin`` because it needs PyYAML's composer, which a submission of JSON
manifests never imports otherwise (``pin.load_preview`` is on every submission's path).
"""

from __future__ import annotations

from typing import Any

import yaml

from ..errors import UsageError


def _key(node: Any) -> Any:
    return node.value if isinstance(node, yaml.ScalarNode) else None


def _child(mapping: yaml.MappingNode, name: str) -> tuple[Any, Any] | None:
    for k, v in mapping.value:
        if _key(k) == name:
            return k, v
    return None


def _quoted(value: str, style: str | None, flow: bool) -> str:
    if style in ("'", '"'):
        return f"{style}{value}{style}"
    return f'"{value}"' if flow else value


def pinned_text(text: str, digest: str, *, json_file: bool) -> str:
    """``text`` with ``image.digest`` set to ``digest`` (replaced, or inserted first in image)."""
    from .strict_yaml import _StrictLoader

    try:
        root = yaml.compose(text, Loader=_StrictLoader)
    except yaml.YAMLError as e:
        raise UsageError(f"cannot find image.digest's place in the file: {e}") from e
    if not isinstance(root, yaml.MappingNode):
        raise UsageError("the manifest is not a mapping; cannot pin image.digest in it")
    image = _child(root, "image")
    flow_root = json_file or bool(root.flow_style)
    if image is None:
        if flow_root:
            raise UsageError('the manifest has no image field; add `"image": {}` and build again')
        sep = "" if text.endswith("\n") or not text else "\n"
        return f"{text}{sep}image:\n  digest: {digest}\n"
    node = image[1]
    if not isinstance(node, yaml.MappingNode):
        raise UsageError("image: must be a mapping to pin image.digest in it")
    flow = json_file or bool(node.flow_style)
    found = _child(node, "digest")
    if found is not None:
        value: Any = found[1]
        if not isinstance(value, yaml.ScalarNode):
            raise UsageError("image.digest: must be a text value to be replaced")
        start: int = value.start_mark.index
        end: int = value.end_mark.index
        return text[:start] + _quoted(digest, value.style, flow) + text[end:]
    if flow:
        key = '"digest"' if json_file else "digest"
        entry = f"{key}: {_quoted(digest, None, True)}"
        if not node.value:  # `image: {}`: just after the brace
            at = node.start_mark.index + 1
            return text[:at] + entry + text[at:]
        at = node.value[0][0].start_mark.index
        return text[:at] + entry + ", " + text[at:]
    first = node.value[0][0].start_mark
    column: int = first.column
    at = first.index - column
    return text[:at] + " " * column + f"digest: {digest}\n" + text[at:]

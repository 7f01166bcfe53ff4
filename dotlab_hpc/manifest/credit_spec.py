"""The manifest's credit as models: its authors and its publisher (rules: ``manifest.credit``).

Here too is the base of every manifest model, ``Frozen``: the light schema needs one config that
every model shares (``manifest._gen_light_schema``).
"""

# No `from __future__ import annotations` here: pydantic would eval each field's annotation
# from its string as it builds the models, a cost every command that imports them pays.

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, StrictStr

from .rules import valid_author_name, valid_orcid, valid_ror, valid_web_url

CreditName = Annotated[StrictStr, AfterValidator(valid_author_name)]


class Frozen(BaseModel):
    """The base of every manifest model: frozen, no unknown field."""

    # the string under each field is its description in `schema` (``models.json_schema``),
    # read from the source there: reading it for every command (pydantic's
    # use_attribute_docstrings) cost each of them the source of every model, parsed
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class AuthorSpec(Frozen):
    """One author of the claim, credited in the bundle's RO-Crate."""

    name: CreditName
    """The name to credit, as the paper writes it."""
    orcid: Annotated[StrictStr, AfterValidator(valid_orcid)] | None = None
    """The author's ORCID iD as a URL (https://orcid.org/0000-0002-1825-0097)."""
    affiliation: CreditName | None = None
    """The name of the author's organisation, as the paper writes it (one line)."""
    ror: Annotated[StrictStr, AfterValidator(valid_ror)] | None = None
    """The affiliation's ROR id as a URL (https://ror.org/05dxps055); needs affiliation."""


class PublisherSpec(Frozen):
    """The organisation that publishes the bundle, named in its RO-Crate."""

    name: CreditName
    """The organisation's name (one line)."""
    url: Annotated[StrictStr, AfterValidator(valid_web_url)] | None = None
    """Its web address or ROR id (https://…); the RO-Crate's id for it."""

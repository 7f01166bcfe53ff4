"""One exception hierarchy: each class knows its exit code, a hint, and whether a retry helps.

Library code raises these; only the command line (``cli/``) prints them and picks the exit code.
"""

from __future__ import annotations


def one_line(text: object) -> str:
    """``text`` safe to show on a terminal, on one line: newlines, ESC and every other control
    or format character (C0, C1, bidi overrides) become escapes such as ``\\x1b``."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


class DotlabError(Exception):
    """Base of every error dotlab-hpc raises on purpose."""

    exit_code: int = 2
    retryable: bool = False
    what: str = "an error"  # what the exit code means, in a verb's --help (``exit_codes``)

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def lines(self) -> list[str]:
        """The lines to show a person: the message, then the hint."""
        out = [self.message]
        if self.hint:
            out.append(f"hint: {self.hint}")
        return out


class UsageError(DotlabError):
    """The command line, a path, or a directory is not usable as given (exit 2)."""

    what = "a usage error"


class ManifestError(DotlabError):
    """The manifest cannot be read or does not follow the contract; one line per problem."""

    what = "an invalid manifest"

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems[0] if problems else "invalid manifest")
        self.problems = problems

    def lines(self) -> list[str]:
        return list(self.problems)


class InputMismatch(DotlabError):
    """A pinned input (dataset, checkout, image) is not what the manifest says (exit 1)."""

    exit_code = 1
    what = "a pinned input (dataset, checkout, image) is not what the manifest says"

    def __init__(self, mismatches: list[str]) -> None:
        super().__init__(mismatches[0] if mismatches else "input mismatch")
        self.mismatches = mismatches

    def lines(self) -> list[str]:
        return list(self.mismatches)


class OperatorError(DotlabError):
    """The cluster or the container runtime failed; not a finding about the claim (exit 2)."""

    what = "the cluster or the container runtime failed"


class Preempted(OperatorError):
    """Slurm preempted the job (PREEMPTED): not a finding; ``run`` and ``submit --wait`` start a
    new attempt when preemption is expected (``--requeue-on-preemption N``, the site file's
    ``preemptible``)."""


class ToolMissing(OperatorError):
    """A program dotlab-hpc needs (sbatch, git, apptainer…) is not installed or not on PATH."""


class ProcTimeout(OperatorError):
    """A program ran past the time dotlab-hpc allows it."""

    retryable = True


class ProcFailed(OperatorError):
    """A program whose lines were read as it printed them (``proc.stream_lines``) failed."""


class SlurmError(OperatorError):
    """Slurm refused or failed a request; ``retryable`` says whether trying again may help.

    ``argv`` is the command that failed (empty when none ran); ``before_controller`` is True when
    the command failed before it could reach the controller (no configuration, a bad option),
    so that no job can exist because of it.
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        retryable: bool = False,
        argv: tuple[str, ...] = (),
        before_controller: bool = False,
    ) -> None:
        super().__init__(message, hint=hint)
        self.retryable = retryable
        self.argv = argv
        self.before_controller = before_controller


class SifError(DotlabError):
    """A file is not a readable SIF image (truncated, not SIF, or lying about its layout)."""

    what = "a file is not a readable SIF image"


class RunDirError(DotlabError):
    """A run directory is missing, incomplete, or in a state the command cannot act on (exit 2)."""

    what = "a run directory cannot be read or acted on"


# How every NotFinished hint begins: what the user (or a script waiting on collect) acts on.
NOT_FINISHED_HINT = "try again when it has finished"


class NotFinished(DotlabError):
    """``collect`` was asked about a job that has not finished yet (exit 2; try again later)."""

    retryable = True
    what = "a job has not finished yet"


# The table of errors: each class above that gives an exit code of its own meaning, in the order
# a verb's --help lists them (``exit_codes``). Subclasses (a Slurm failure, a missing tool) keep
# their parent's code and meaning.
ERRORS: tuple[type[DotlabError], ...] = (
    InputMismatch,
    UsageError,
    ManifestError,
    OperatorError,
    SifError,
    RunDirError,
    NotFinished,
)
INTERRUPTED = 130  # Ctrl-C: the exit code of an interrupted command


def exit_codes() -> dict[int, list[str]]:
    """Each exit code an error gives, with what gives it (``ERRORS``), smallest code first."""
    table: dict[int, list[str]] = {}
    for error in ERRORS:
        table.setdefault(error.exit_code, []).append(error.what)
    return dict(sorted(table.items()))

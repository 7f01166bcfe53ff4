"""The command line: parse arguments, call ``api``, print; the ONLY place that picks exit codes.

Every verb is one function of ``api`` (the one definition of what it does). ``verbs`` holds the
one table of verbs, each with its grammar and its handler; a handler turns the verb's arguments
into that call and its answer into lines for people (``printers``) or JSON, through ``output``.
``main`` parses the arguments and runs the handler the table gave the verb.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys

from .. import TOOL_NAME
from ..errors import INTERRUPTED, DotlabError
from .output import print_error_lines

# Imported where used: `dotlab-hpc hash` starts in ~50 ms and must not pay for pydantic,
# subprocess or even typing (issue 3's speed targets count start-up). mypy reads this block.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dotlab-hpc``: returns the exit code."""
    collecting = gc.isenabled()
    # A verb is short work that builds many small objects (pydantic's models on import, one per
    # claim or run directory), next to none in a cycle: the cyclic collector would only walk
    # them (~7 % of `status` over 10,000 runs, ~50 ms of a submission of 500). Reference
    # counting frees them all the same. Following runs for hours (`live_table`) turns it on.
    gc.disable()
    # pydantic looks for plugins (every installed distribution's entry points) before its first
    # model: tens of milliseconds per command, and a plugin is third-party code inside every
    # validation, which nothing dotlab-hpc decides should depend on. A value already set stays.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _no_plugin_search()
    try:
        return _main(argv)
    finally:
        if collecting:
            gc.enable()


# pydantic's module that finds its plugins, and what it says when plugins are off
_PLUGIN_LOADER = "pydantic.plugin._loader"
_PLUGINS_OFF = ("__all__", "1", "true")


def _no_plugin_search() -> None:
    """With plugins off, pydantic still imports the module that would look for them, and with
    it ``importlib.metadata`` (``email``, ``zipfile``, ``csv``…): ~10 ms of every command. A
    module of that name that answers "no plugin" stands in for it, unless pydantic is imported
    already or plugins are on (then nothing changes). Any other name asked of it is the real
    module's, imported then."""
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in _PLUGINS_OFF or "pydantic" in sys.modules:
        return
    import types

    stand_in = types.ModuleType(_PLUGIN_LOADER, "pydantic's plugin loader, plugins off")

    def real(name: str) -> object:
        if name.startswith("__"):  # the import system's questions (``__path__``): none here
            raise AttributeError(name)
        sys.modules.pop(_PLUGIN_LOADER, None)
        import importlib

        return getattr(importlib.import_module(_PLUGIN_LOADER), name)

    stand_in.get_plugins = lambda: ()  # type: ignore[attr-defined]
    stand_in.__getattr__ = real  # type: ignore[method-assign]
    sys.modules[_PLUGIN_LOADER] = stand_in


def entry() -> NoReturn:
    """The ``dotlab-hpc`` program (and ``python -m dotlab_hpc``): ``main``, then out without the
    interpreter's teardown.

    A command that returned has closed and synced every file it wrote; what teardown would do
    then (a full cyclic collection, each object freed one by one, each module torn down) cost
    135 ms after a submission of 500 claims, a sixth of the whole run, and serves none of it.
    Standard output and error are flushed first; a reader that has gone (a closed pipe, as in
    ``| head``) changes nothing, as in ``main``. An uncaught exception (a bug) or SystemExit
    (``--help``, an argument error) leaves the usual way, traceback and all. A Ctrl-C once the
    command has returned changes nothing either: its exit code stands.

    The cyclic collector stays off to the end (``main`` turns it back on only for a caller that
    had it on): every object the command made is still in its youngest generation, so the first
    allocation after turning it on walked them all, 20 ms after a submission of 500 claims.
    """
    gc.disable()
    code = main()
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # done: a late Ctrl-C interrupts nothing
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a broken pipe; a closed stream
            stream.flush()
    os._exit(code)


def _main(argv: Sequence[str] | None) -> int:
    from .options import joined_sbatch_args
    from .parser import parse
    from .verbs import build_parser

    words = joined_sbatch_args(sys.argv[1:] if argv is None else argv)
    args = parse(build_parser(frozenset(words)), words)
    try:
        code: int = args.handler(args)  # the verb's handler, from the table (``verbs.VERBS``)
    except DotlabError as e:
        if args.debug:
            import traceback

            traceback.print_exc()
        print_error_lines(e)
        return e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(f"{TOOL_NAME}: interrupted\n")
        return INTERRUPTED
    except BrokenPipeError:
        return 0
    return code

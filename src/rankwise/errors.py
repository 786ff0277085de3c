"""Every exception and warning rankwise raises on purpose, in one place, and its one way of warning.

The hierarchy::

    RankwiseError                      raised on purpose; the CLI prints one line and exits 2
    ├── InputError (ValueError)        a user's file or object is wrong: names file, line and field
    ├── MeasureParamError (ValueError) a metric's parameter is malformed (a gain map, a coefficient list)
    ├── ParseError (ValueError)        an LLM reply holds no usable verdict (the message is shown to the model)
    │   └── CountMismatch              a batch reply with another number of verdicts than chunks sent
    ├── EndpointError                  the LLM endpoint cannot be used at all: the run stops
    │   ├── BatchApiError              a Batch-API job failed for good (what was had is in the cache)
    │   └── RunStopped                 a run stopped early; ``result`` holds all had, ``cause`` why
    │       ├── JudgeStopped
    │       ├── GenerationStopped
    │       └── SynthStopped
    ├── CallError                      one call gave no usable reply after its retries: that item fails
    │   ├── ReplyError                 an HTTP 200 whose body is not a usable chat completion
    │   ├── ContextOverflow            the prompt does not fit the model's context (not retried)
    │   ├── BudgetExhausted            ``max_calls`` requests were sent already
    │   └── Unusable                   a refusal, or a reply still unreadable after the repair
    ├── CacheWriteError                the LLM cache cannot be written: the run stops rather than pay twice
    ├── LocalServerError               the local LLM server cannot be had
    ├── MlflowLogError                 logging to MLflow failed
    └── RegressionError (AssertionError)  a failed ``assert_no_regression`` / ``assert_retrieval``

    RunInterrupted (KeyboardInterrupt) Ctrl-C or SIGTERM during a long run; ``result`` holds all had
    ├── JudgeInterrupted
    ├── GenerationInterrupted
    └── SynthInterrupted

    RankwiseWarning (UserWarning)      usable input that is probably not what was meant: one line,
    once ├── TraceSkipWarning               traces or spans that could not become cases (counted)
    ├── RetrieverRandomIdWarning       a retriever's chunk ids look random (uuid4) ├──
    RetrieverShortListWarning      a retriever gave fewer than k chunks for some questions └──
    RetrieverDepthWarning          k asked deeper than the retriever's own depth

An interrupt is a ``KeyboardInterrupt``, not a :class:`RankwiseError`, on purpose: an ``except
Exception`` (a per-item handler, a user's own) must never swallow Ctrl-C. A call's failure
(:class:`CallError`) is counted per item and the run goes on; an endpoint's (:class:`EndpointError`)
stops the run. The task that raises a ``*Stopped`` / ``*Interrupted`` is named by the class; what
the task had is its ``result``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from os import PathLike
from typing import Any

__all__ = ["RankwiseError", "InputError", "RankwiseWarning", "warn", "in_user_words", "MeasureParamError",
           "ParseError", "CountMismatch", "EndpointError", "BatchApiError", "RunStopped", "JudgeStopped",
           "GenerationStopped", "CallError", "ReplyError", "ContextOverflow", "BudgetExhausted", "Unusable",
           "CacheWriteError", "LocalServerError", "MlflowLogError", "RegressionError", "RunInterrupted",
           "JudgeInterrupted", "GenerationInterrupted", "SynthStopped", "SynthInterrupted", "TraceSkipWarning", "RetrieverRandomIdWarning",
           "RetrieverShortListWarning", "RetrieverDepthWarning"]


class RankwiseWarning(UserWarning):
    """Input that rankwise can use but that is probably not what the user meant (the CLI prints one
    line)."""


def warn(message: str, *, summary: dict | None = None) -> None:
    """Warn once (category :class:`RankwiseWarning`) and keep the message in
    ``summary["warnings"]``.

    Example:
        >>> import warnings
        >>> summary = {}
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn("3 cases list a chunk id twice", summary=summary)
        >>> summary["warnings"], caught[0].category.__name__
        (['3 cases list a chunk id twice'], 'RankwiseWarning')
    """
    if summary is not None:
        summary.setdefault("warnings", [])
        if message not in summary["warnings"]:
            summary["warnings"].append(message)
    warnings.warn(message, RankwiseWarning, stacklevel=2)


class RankwiseError(Exception):
    """Base class of every error rankwise raises on purpose."""


class InputError(RankwiseError, ValueError):
    """Bad input: names the source (file or object), the 1-based line and the field at fault.

    Example:
        >>> str(InputError("not a number: 'x'", source="run.trec", line=3, field="score"))
        "run.trec:3: field 'score': not a number: 'x'"
    """

    def __init__(
        self,
        problem: str,
        *,
        source: str | PathLike | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.problem = problem
        self.source = None if source is None else str(source)
        self.line = line
        self.field = field
        super().__init__(self._format())

    def _format(self) -> str:
        where = self.source or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        what = f"field '{self.field}': " if self.field else ""
        if self.field and self.field.startswith("--"):  # a command-line option, not a file's field
            what = f"option {self.field}: "
        return f"{where}: {what}{self.problem}"


class MeasureParamError(RankwiseError, ValueError):
    """A measure's parameter is malformed (a gain map, a coefficient list ...); shown as one line.
    """


class ParseError(RankwiseError, ValueError):
    """A reply that does not hold a usable verdict; the message says why (it is shown to the model).
    """


class CountMismatch(ParseError):
    """A batch reply with a different number of verdicts than chunks sent."""


class EndpointError(RankwiseError):
    """The endpoint cannot be used at all (unreachable, bad key, unknown model): the run stops."""


class BatchApiError(EndpointError):
    """A Batch-API call failed for good (retries exhausted, or a reply that cannot be used): the job
    stops; the batch ids and results received so far are in the cache, and a rerun resumes."""


class RunStopped(EndpointError):
    """The run stopped early (endpoint gone, key or model refused, cache unwritable); ``result``
    holds all had, ``cause`` the error that stopped it. Each task names its own subclass."""

    def __init__(self, message: str, result: Any, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.result = result
        self.cause = cause  # the EndpointError or CacheWriteError that stopped the run


class JudgeStopped(RunStopped):
    """The judge's run stopped: ``result`` (a ``JudgeResult``) holds every verdict had (in the cache
    too, unless the cache was the problem); the chunks not judged are ``missing``."""


class GenerationStopped(RunStopped):
    """A generation run stopped: ``result`` (a ``GenResult``) holds every reply had (in the cache
    too)."""


class SynthStopped(RunStopped):
    """A synth run stopped: ``result`` (a ``SynthSummary``) counts the samples decided (all written,
    every reply had in the cache)."""


class CallError(RankwiseError):
    """One call gave no usable reply after its retries; ``str()`` says why, ``kind`` what kind of
    failure it was (``HTTP 500``, ``timeout``, ``connection``, ``bad reply`` ...: the key a run's
    summary counts it under). The item fails, the run goes on.

    Example:
        >>> (
        ...     CallError("HTTP 500: boom (gave up after 5 attempts)", kind="HTTP 500").kind,
        ...     ReplyError("bad reply: x").kind,
        ... )
        ('HTTP 500', 'bad reply')
    """

    kind = "call failed"

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class ReplyError(CallError):
    """An HTTP 200 whose body is not a usable chat completion; ``str()`` starts with ``bad reply:``.
    """

    kind = "bad reply"


class ContextOverflow(CallError):
    """The prompt does not fit the model's context (the server said so); ``str()`` starts with
    ``context length exceeded:``. Not retried: the same prompt would not fit again."""

    kind = "context length exceeded"


class BudgetExhausted(CallError):
    """``max_calls`` requests were sent already."""

    kind = "max-calls"


class Unusable(CallError):
    """The reply is a refusal (``refused: ...``) or stayed unreadable after the repair and the fresh
    call, if any (``unparseable reply after ...``): the item fails, like a call that failed after
    its retries."""


class CacheWriteError(RankwiseError):
    """The LLM cache cannot be written (disk full, file gone): the run stops rather than pay for
    replies it cannot keep."""


class LocalServerError(RankwiseError):
    """The local server cannot be had: a package missing, the model file bad, or the server did not
    start."""


class MlflowLogError(RankwiseError):
    """Logging to MLflow failed (the store refused a write, the server went away ...): one line
    saying so."""


class RegressionError(RankwiseError, AssertionError):
    """A failed ``assert_no_regression`` or ``assert_retrieval``; ``result`` holds what was
    measured.

    Example:
        >>> isinstance(RegressionError("ndcg@10 dropped", None), AssertionError)
        True
    """

    def __init__(self, message: str, result: Any) -> None:
        super().__init__(message)
        self.result = result


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a run; ``result`` holds all had (all of it in the cache),
    ``message`` says where it is and how to resume. Each task names its own subclass.

    Example:
        >>> exc = JudgeInterrupted({"verdicts": 3}, "interrupted: rerun to resume")
        >>> isinstance(exc, KeyboardInterrupt), isinstance(exc, Exception), exc.message
        (True, False, 'interrupted: rerun to resume')
    """

    def __init__(self, result: Any, message: str = "interrupted") -> None:
        super().__init__(message)
        self.result = result
        self.message = message


class JudgeInterrupted(RunInterrupted):
    """Ctrl-C or SIGTERM while judging: ``result`` is the ``JudgeResult`` of the run (a ``JudgeRun``
    from ``judge_testset``: the records written, every verdict in the cache)."""


class GenerationInterrupted(RunInterrupted):
    """Ctrl-C during a generation run; ``result`` (a ``GenResult``) holds every reply had (all in
    the cache)."""


class SynthInterrupted(RunInterrupted):
    """Ctrl-C or SIGTERM during a synth run; ``result`` (a ``SynthSummary``): every sample decided
    is written, every reply had is in the cache."""


class TraceSkipWarning(RankwiseWarning):
    """Some traces or retriever spans could not become cases and were skipped (counted in the
    summary)."""


class RetrieverRandomIdWarning(RankwiseWarning):
    """The retriever's chunk ids look random (uuid4): they change on every run."""


class RetrieverShortListWarning(RankwiseWarning):
    """The retriever gave fewer than k chunks for some questions (MMR, a score threshold, its own
    top k)."""


class RetrieverDepthWarning(RankwiseWarning):
    """k asked deeper than the retriever's own depth: the run is evaluated at the retriever's own
    depth."""


_IDENTIFIER = re.compile(r"(?<![\w.'-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w'(-])")


def in_user_words(exc: BaseException, names: Mapping[str, str]) -> str:
    """The one-line text of ``exc`` with the library's parameter names as the caller spells them.

    ``names`` maps a keyword argument (``rerank_model``) to the caller's name for it (the CLI flag
    ``--rerank``). An :class:`InputError` about a parameter (no file, no line) is headed by that
    name (or by nothing when it names no field); a parameter named in the text (``give
    rerank_model``) is renamed; files and their fields are left alone.

    Example:
        >>> err = InputError("max K must be at least 1, not 0", field="max_k")
        >>> in_user_words(err, {"max_k": "--max-k"})
        '--max-k: max K must be at least 1, not 0'
        >>> in_user_words(
        ...     InputError("'llm' needs a reranker: give rerank_model"),
        ...     {"rerank_model": "--rerank"},
        ... )
        "'llm' needs a reranker: give --rerank"
    """
    def rename(text: str, keep: str | None = None) -> str:
        return _IDENTIFIER.sub(lambda m: m.group(0) if m.group(0) == keep else names.get(m.group(0), m.group(0)),
                               text)

    if not isinstance(exc, InputError):
        return rename(str(exc))
    # about a file: its own field keeps the file's word (a config key); options the text mentions
    # become flags
    problem = rename(exc.problem, keep=exc.field if exc.source is not None else None)
    if exc.source is None and exc.line is None and (exc.field is None or exc.field in names):
        if exc.field is None or re.search(rf"(?<![\w-]){re.escape(names[exc.field])}(?![\w-])", problem):
            return problem  # no field, or the text names the flag already
        return f"{names[exc.field]}: {problem}"
    return str(InputError(problem, source=exc.source, line=exc.line, field=exc.field))

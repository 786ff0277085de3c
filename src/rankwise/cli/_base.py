"""What every command shares: the ``main`` group, output formats, failing with exit 2."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, fields

import click

from rankwise.errors import RankwiseError

FORMATS = ["table", "json", "csv", "trec"]


class _Group(click.Group):
    """A click group that turns our errors into one line on stderr and exit code 2, and leaves a
    real process through ``os._exit`` once its output is flushed."""

    def invoke(self, ctx):
        import warnings

        from rankwise.errors import RankwiseWarning

        def show(message, category, *args, **kwargs):
            if issubclass(category, RankwiseWarning):
                if str(message) not in said:  # a warning given twice (e.g. by two passes) is printed once
                    said.add(str(message))
                    click.echo(f"rankwise: warning: {message}", err=True)
            else:
                shown(message, category, *args, **kwargs)

        shown = warnings.showwarning
        said: set[str] = set()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always", RankwiseWarning)
                warnings.showwarning = show
                return super().invoke(ctx)
        except RankwiseError as exc:
            from rankwise.errors import in_user_words

            _fail(in_user_words(exc, _flag_names(self.get_command(ctx, ctx.invoked_subcommand or ""))))
        except click.BadParameter as exc:  # e.g. a directory or an unreadable file given as a path
            _fail(exc.format_message())
        except KeyboardInterrupt:
            click.echo("rankwise: interrupted", err=True)
            sys.exit(_interrupt_code())
        except BrokenPipeError:
            sys.exit(0)
        except OSError as exc:  # a file we read or write: full disk, no permission ...
            where = f"{exc.filename}: " if exc.filename else ""
            _fail(f"{where}{exc.strerror or exc}")

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if args is not None or not standalone_mode:  # called from Python (tests, CliRunner): plain click
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        # The command line. Leave through os._exit after flushing: at interpreter teardown Arrow's
        # thread pools can abort the process ("terminate called without an active exception", rc -6,
        # see apache/arrow#34314) after correct output, which a CI gate would read as a failure.
        code = 1
        from rankwise._signals import install_sigterm

        install_sigterm()  # SIGTERM (timeout, CI, container stop) takes Ctrl-C's path: records kept, exit 143
        try:
            super().main(args, prog_name, complete_var, standalone_mode, **extra)
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        except KeyboardInterrupt:
            print("rankwise: interrupted", file=sys.stderr)
            code = _interrupt_code()
        except BaseException:
            import traceback

            traceback.print_exc()
        _exit_now(code)


def _flag_names(command: click.Command | None) -> dict[str, str]:
    """The library's parameter names -> this command's flags (``rerank_model`` -> ``--rerank``,
    ``max_k`` -> ``--max-k``, ``testset`` -> ``TESTSET``), for error messages in the user's words.
    """
    names: dict[str, str] = {}
    commands = [command] if command is not None else []
    if isinstance(command, click.Group):
        commands += list(command.commands.values())
    for cmd in commands:
        for p in cmd.params:
            if p.name is None or p.name in names:
                continue
            if isinstance(p, click.Argument):
                names[p.name] = p.human_readable_name
            else:
                longs = [o for o in p.opts if o.startswith("--")]
                names[p.name] = (longs or p.opts)[0]
    for cmd in commands:  # then other spellings: --relevance/--source (dest source), -m/--metric (metrics)
        for p in cmd.params:
            if p.name is not None and p.name in names:
                for other in [o.lstrip("-").replace("-", "_") for o in p.opts if o.startswith("--")]:
                    names.setdefault(other, names[p.name])
                names.setdefault(p.name.removesuffix("s"), names[p.name])
    return names


def _fail(message: str) -> None:
    """One line on stderr, exit code 2."""
    click.echo("rankwise: error: " + " ".join(message.splitlines()), err=True)
    sys.exit(2)


def _interrupt_code() -> int:
    """130 after Ctrl-C, 143 after SIGTERM."""
    from rankwise._signals import interrupt_exit_code

    return interrupt_exit_code()


def _exit_now(code: int) -> None:
    """Flush stdout and stderr, then end the process at once (no interpreter teardown)."""
    import contextlib
    import os

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rankwise")
@click.option("--width", type=click.IntRange(min=20), default=None,
              help="Columns of printed tables (default: the terminal's; unlimited when piped; or $RANKWISE_WIDTH).")
def main(width: int | None) -> None:
    """Evaluate the retrieval stage of a RAG pipeline: exact IR metrics, RAG context metrics,
    verdicts from any source, comparisons and reports."""
    if width is not None or "rankwise.report.console" in sys.modules:  # rich only when tables are printed
        from rankwise.report.console import set_width

        set_width(width)


def _split_metrics(values: tuple[str, ...]) -> list[str]:
    """``-m P@5 -m ndcg@10,map -m P.5,10`` -> one name per metric, split by the library's parser."""
    from rankwise.metrics.registry import split_metric_list

    return [name for v in values for name in split_metric_list(v)]


def _print_result(result, fmt: str, per_query: bool) -> None:
    if fmt == "json":
        from rankwise.report.text import to_json

        click.echo(to_json(result, per_query=per_query))
    elif fmt == "csv":
        from rankwise.report.text import to_csv

        click.echo(to_csv(result, per_query=per_query), nl=False)
    elif fmt == "trec":
        from rankwise.report.text import to_trec

        click.echo(to_trec(result, per_query=per_query), nl=False)
    else:
        from rankwise.report.console import print_eval

        print_eval(result, per_query=per_query)


# ------------------------------------------------------------------------------ LLM endpoint / call
# / cost options
_LLM_OPTION_NAMES = ("model", "base_url", "api_key", "config_path", "prompt_file", "concurrency", "rpm", "timeout",
                     "max_retries", "max_calls", "max_cost", "cache_path", "price_in", "price_out", "dry_run", "quiet")


@dataclass(frozen=True)
class LLMOptions:
    """The shared LLM options of one command line, as typed values (None: not given); a command gets
    them as one ``llm`` argument (``--dry-run`` and ``--quiet`` stay its own) and passes them to
    :meth:`config`."""

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    config_path: str | None = None
    prompt_file: str | None = None
    concurrency: int | None = None
    rpm: float | None = None
    timeout: float | None = None
    max_retries: int | None = None
    max_calls: int | None = None
    max_cost: float | None = None
    cache_path: str | None = None
    price_in: float | None = None
    price_out: float | None = None

    def config(self, **extra):
        """The one LLMConfig of these options, passed whole to the library; ``extra``: what the
        command fixes or adds (the judge's mode, the prompt file, ...)."""
        from rankwise.llm.config import resolve_llm_config

        return resolve_llm_config(config=self.config_path, model=self.model, base_url=self.base_url,
                                  api_key=self.api_key, concurrency=self.concurrency, rpm=self.rpm,
                                  timeout=self.timeout, max_retries=self.max_retries, max_calls=self.max_calls,
                                  price_in=self.price_in, price_out=self.price_out, cache=self.cache_path, **extra)


_PACKED = tuple(f.name for f in fields(LLMOptions))


def _llm_options(*, model: str, dry_run: str, prompt: str | None = None, model_required: bool = False,
                 omit: tuple[str, ...] = ()):
    """Decorator: the endpoint, call and cost options of every command that calls an LLM, each
    declared here once (one flag, one default, one help); the command resolves them with
    ``resolve_llm_config`` (itself, or through the library function it calls).

    ``model``: whose model it is ("Judge", "Generator"); ``model_required``: --model must be given
    (no RANKWISE_JUDGE_MODEL / config fallback: a generator is not the judge); ``prompt``: the
    shipped prompt --prompt overrides (None: no --prompt); ``dry_run``: what --dry-run prints;
    ``omit``: options (by parameter name) the command's library function does not take.
    """
    unknown = set(omit) - set(_LLM_OPTION_NAMES)
    if unknown:  # a typo in a command's declaration, found at import
        raise ValueError(f"unknown LLM options {sorted(unknown)}")
    fallback = "" if model_required else " (or RANKWISE_JUDGE_MODEL, or model in rankwise.toml [llm])"
    options = {
        "model": click.option("--model", required=model_required, help=f"{model} model name{fallback}."),
        "base_url": click.option("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 "
                                                    "(or OPENAI_BASE_URL)."),
        "api_key": click.option("--api-key", help="API key (or OPENAI_API_KEY); local servers need none."),
        "config_path": click.option("--config", "config_path", type=click.Path(dir_okay=False),
                                    help="Config file with an [llm] table: endpoint, calls, prices, cache (default: "
                                         "./rankwise.toml, ~/.config/rankwise/config.toml)."),
        "prompt_file": None if prompt is None else click.option(
            "--prompt", "prompt_file", type=click.Path(dir_okay=False), help=f"TOML file overriding the shipped "
                                                                             f"{prompt}."),
        "concurrency": click.option("--concurrency", type=int, default=None,
                                    help="Requests in flight at most (default 128; halved automatically on "
                                         "429/503/timeouts)."),
        "rpm": click.option("--rpm", type=float, default=None, help="Requests per minute at most (default: no "
                                                                    "limit)."),
        "timeout": click.option("--timeout", type=float, default=None, help="Seconds per request (default 60)."),
        "max_retries": click.option("--max-retries", type=int, default=None,
                                    help="Retries on 429/5xx/timeouts (default 4)."),
        "max_calls": click.option("--max-calls", type=int, default=None,
                                  help="Send at most this many requests; the rest is 'missing'."),
        "max_cost": click.option("--max-cost", type=float, default=None,
                                 help="Stop sending calls once this much money is spent (needs "
                                      "--price-in/--price-out)."),
        "cache_path": click.option("--cache", "cache_path", type=click.Path(dir_okay=False),
                                   help="LLM cache file (default: $RANKWISE_CACHE, else llm-cache.sqlite in "
                                        "$RANKWISE_CACHE_DIR or ~/.cache/rankwise)."),
        "price_in": click.option("--price-in", type=float, default=None,
                                 help="Price per 1M prompt tokens, for the cost."),
        "price_out": click.option("--price-out", type=float, default=None,
                                  help="Price per 1M completion tokens, for the cost."),
        "dry_run": click.option("--dry-run", is_flag=True, help=dry_run),
        "quiet": click.option("--quiet", is_flag=True, help="No progress bar."),
    }
    chosen = [options[name] for name in _LLM_OPTION_NAMES if name not in omit and options[name] is not None]

    def decorate(func):
        @functools.wraps(func)
        def packed(*args, **kwargs):  # the shared options, popped from click's keywords, as one LLMOptions
            return func(*args, llm=LLMOptions(**{n: kwargs.pop(n) for n in _PACKED if n in kwargs}), **kwargs)

        command = packed
        for option in reversed(chosen):
            command = option(command)
        return command

    return decorate


def _check_generator_outputs(outputs: dict, testset, llm: LLMOptions, force: bool) -> None:
    """Before any call: the outputs are no input, no stranger's file (unless --force), a plot is a
    PNG; the cache (read and written) is no input or output."""
    from rankwise._outputs import check_outputs, check_plot_path

    inputs = [testset, llm.config_path, llm.prompt_file]
    check_outputs(outputs, inputs, force=force)
    check_plot_path(outputs.get("--plot"))
    check_outputs({"--cache": llm.cache_path}, [*inputs, *outputs.values()], force=True)


# ------------------------------------------------------------------------------------------------
# MLflow options
def _mlflow_options(func):
    """Decorator: ``--mlflow`` (log the result to MLflow), ``--mlflow-uri`` and
    ``--mlflow-experiment``, declared once for every command that logs (eval, eval-rag, compare,
    compare-rag, gate, sweep); the command passes them to :func:`_log_mlflow` as ``mlflow_opts``."""
    options = [
        click.option("--mlflow", "mlflow_log", is_flag=True,
                     help="Log the result to MLflow: metric means, parameters, the per-query table, and as "
                          "artifacts the files this command writes (its --records, --html) (pip install "
                          "'rankwise[mlflow]')."),
        click.option("--mlflow-uri", default=None,
                     help="MLflow tracking URI, e.g. sqlite:///mlflow.db (default: $MLFLOW_TRACKING_URI; "
                          "implies --mlflow)."),
        click.option("--mlflow-experiment", default=None,
                     help="MLflow experiment name (created if needed; implies --mlflow)."),
    ]

    def wrapper(*args, mlflow_log, mlflow_uri, mlflow_experiment, **kwargs):
        log = bool(mlflow_log or mlflow_uri or mlflow_experiment)
        if log:  # before any work: a URI that cannot be logged to is one line, not a crash after the metrics
            _check_mlflow_uri(mlflow_uri)
        kwargs["mlflow_opts"] = {"log": log, "uri": mlflow_uri, "experiment": mlflow_experiment}
        return func(*args, **kwargs)

    import functools

    wrapped = functools.wraps(func)(wrapper)
    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped


def _check_mlflow_uri(uri: str | None) -> None:
    """The tracking URI checked (one line, exit 2, when it cannot be logged to); a server that goes
    away later is given MLflow's HTTP timeout and retries of this process (unless set): seconds, not
    minutes."""
    import os

    from rankwise.integrations.mlflow import check_tracking_uri

    resolved = check_tracking_uri(uri)
    if resolved.lower().startswith(("http:", "https:")):
        for name, value in (("MLFLOW_HTTP_REQUEST_TIMEOUT", "20"), ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2"),
                            ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")):
            os.environ.setdefault(name, value)


def _log_mlflow(opts: dict, result, *, html=None, records=None, run_name: str | None = None) -> None:
    """Log ``result`` when ``--mlflow`` (or its URI / experiment) was given; say where on stderr."""
    if not opts.get("log"):
        return
    from rankwise.integrations.mlflow import log

    run_id = log(result, experiment=opts.get("experiment"), tracking_uri=opts.get("uri"), run_name=run_name,
                 html=html, records=records)
    click.echo(f"rankwise: logged to MLflow run {run_id}"
               + (f" (experiment {opts['experiment']})" if opts.get("experiment") else ""), err=True)

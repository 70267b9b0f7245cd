"""Load a task dataset once per process, from the hub or from a local file.

Dataset-backed envs (math, code, QA) hold a reference to a shared :class:`datasets.Dataset` instead of
a copy each: a vector env of 64 math envs reads one Arrow table. The cache is keyed by everything that
decides the rows (source, config, split, data files), so two ids that read the same data share it.

``datasets`` is imported on first load, never when the env packages are imported.
"""

from __future__ import annotations

import numbers
import os
import socket
import threading
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gem_core.env import Env
from gem_core.errors import DependencyNotInstalled, GemError, InvalidArgument, InvalidArgumentType, MissingFile

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset

__all__ = ["load_rows", "DatasetEnv", "DatasetUnavailableError", "clear_cache", "DataFiles", "register_hub_datasets", "check_index",
           "check_text"]

DataFiles = str | os.PathLike | Sequence[str | os.PathLike] | dict[str, Any]
"""One local file, several files, or a ``datasets``-style ``{split: files}`` mapping."""

_LOCAL_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}

_cache: dict[tuple, Dataset] = {}
_cache_lock = threading.Lock()
#: How long the one connect that tells whether the hub can be reached may take (datasets' own download
#: retries a failed connection five times with backoff, ~25 s, before it reports anything).
HUB_PROBE_SECONDS = 3.0


class DatasetUnavailableError(GemError, RuntimeError):
    """The dataset could not be loaded (typically: no network and no local copy)."""


def _check_data_files(data_files: Any) -> None:
    """Refuse ``data_files`` that name no file, before the loader takes them apart (``next(iter(123))``
    raised a bare TypeError from inside it)."""
    def is_path(value: Any) -> bool:
        return isinstance(value, (str, os.PathLike))

    def is_files(value: Any) -> bool:
        return is_path(value) or (isinstance(value, Sequence) and bool(value) and all(is_path(v) for v in value))

    files = data_files.values() if isinstance(data_files, dict) else [data_files]
    if not files or not all(is_files(value) for value in files):
        raise InvalidArgumentType(
            f"data_files={data_files!r:.80} names no file: give a path, a list of paths or a {{split: path(s)}} dict, "
            "e.g. data_files='rows.jsonl'."
        )


def check_text(name: str, value: Any) -> str:
    """A constructor's text argument ``name`` (a prompt suffix), checked when the env is made, not at the first
    reset where ``question + None`` fails.

    Raises:
        InvalidArgumentType: if it is not a str.
    """
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{name} must be a str, got {type(value).__name__} {value!r:.80}.")
    return value


def check_index(index: Any, count: int) -> int:
    """A reset's ``options["index"]``, checked against the ``count`` rows: a text or nan failed with a bare
    error, and ``int(index) % count`` read -1, 10**9 or 2.7 as another row than the one asked for.

    Raises:
        InvalidArgument: if it is not a whole number from 0 to ``count - 1``.
    """
    if isinstance(index, numbers.Integral) and not isinstance(index, bool) and 0 <= int(index) < count:
        return int(index)
    raise InvalidArgument(f"options['index']={index!r:.40} names no row: give a whole number from 0 to {count - 1} (the dataset has {count} rows).")


def _freeze(data_files: DataFiles | None) -> Any:
    if data_files is None:
        return None
    if isinstance(data_files, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in data_files.items()))
    if isinstance(data_files, (str, os.PathLike)):
        return (str(Path(data_files).resolve()),)
    return tuple(str(Path(f).resolve()) for f in data_files)


def _builder_for(data_files: DataFiles) -> str:
    first = data_files
    if isinstance(first, dict):
        first = next(iter(first.values()))
    if not isinstance(first, (str, os.PathLike)):
        first = next(iter(first))
    suffix = Path(first).suffix.lower()
    if suffix not in _LOCAL_BUILDERS:
        raise InvalidArgument(f"Cannot tell the format of {first!s}: use a file ending in one of {sorted(_LOCAL_BUILDERS)}.")
    return _LOCAL_BUILDERS[suffix]


def _as_paths(data_files: DataFiles) -> DataFiles:
    if isinstance(data_files, dict):
        return {k: _as_paths(v) for k, v in data_files.items()}
    if isinstance(data_files, (str, os.PathLike)):
        return str(data_files)
    return [str(f) for f in data_files]


def load_rows(
    path: str | None,
    *,
    split: str = "train",
    name: str | None = None,
    data_files: DataFiles | None = None,
) -> Dataset:
    """The rows of one split, loaded once per process and shared.

    Args:
        path: a hub id (``"openai/gsm8k"``); ignored when ``data_files`` is given.
        split: the split to read. Local files without a split mapping are all ``"train"``, so any
            ``split`` reads them; a ``{split: files}`` mapping must have ``split``.
        name: the hub config (``"main"`` for GSM8K).
        data_files: local JSONL / JSON / Parquet / CSV file(s) with the same columns as the hub dataset;
            these are read instead of the hub, which works offline.

    Raises:
        DatasetUnavailableError: the hub could not be reached (or the id/split is wrong) and no local file
            was given; the message says how to point the env at a local copy. Also when a local file cannot
            be read (empty, or a line that is not JSON); the message names the file.
        MissingFile: (a FileNotFoundError) a local file does not exist.
        InvalidArgumentType: ``data_files`` is not a path, a list of paths or a ``{split: path(s)}`` dict.
        InvalidArgument: a ``{split: path(s)}`` dict has no ``split``, or a file's format cannot be told.
    """
    if data_files is not None:
        _check_data_files(data_files)
    key = (path if data_files is None else None, name, split, _freeze(data_files))
    cached = _cache.get(key)
    if cached is not None:
        return cached
    with _cache_lock:
        if key in _cache:
            return _cache[key]
        dataset = _load_uncached(path, split=split, name=name, data_files=data_files)
        _cache[key] = dataset
        return dataset


def _load_uncached(path: str | None, *, split: str, name: str | None, data_files: DataFiles | None) -> Dataset:
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise DependencyNotInstalled('Dataset-backed envs need the `datasets` package: pip install -e ".[math]" in the GEM checkout (or pip install datasets).') from exc
    if data_files is not None:
        for file in _iter_files(data_files):
            if not Path(file).exists():
                raise MissingFile(f"Local data file {file!s} does not exist; give an existing path in data_files.")
        builder = _builder_for(data_files)
        files = _as_paths(data_files)
        try:
            loaded = datasets.load_dataset(builder, data_files=files)
        except Exception as exc:  # an empty file: a bare StopIteration; a bad line: DatasetGenerationError
            raise DatasetUnavailableError(_unreadable(data_files, builder, exc)) from exc
        if split in loaded:
            return loaded[split]
        if not isinstance(data_files, dict) and len(loaded) == 1:  # a plain file list is one "train" split: any split reads it
            return next(iter(loaded.values()))
        raise InvalidArgument(
            f"split={split!r} is not in data_files, which gives the split(s) {sorted(loaded)}: pass split= one of "
            f"them, or add {split!r}: path(s) to the data_files dict."
        )
    if not path:
        raise InvalidArgument("Give either a hub id (`dataset_path=`) or local files (`data_files=`).")
    unreachable = None if _in_hf_cache(path) else _hub_unreachable()
    if unreachable:  # not cached and no way to download it: say so now, not after datasets' retries
        raise DatasetUnavailableError(f"{_readers(path)}the hub dataset {path!r}, which is not in the Hugging Face cache, "
                                      f"and the hub cannot be reached ({unreachable}). {_OFFLINE_FIXES}")
    try:
        return datasets.load_dataset(path, name, split=split)
    except Exception as exc:  # network errors come as many types (ConnectionError, HfHubHTTPError, OSError, ...)
        raise DatasetUnavailableError(
            f"{_readers(path)}the hub dataset {path!r} (config={name!r}, split={split!r}), which could not be loaded: "
            f"{type(exc).__name__}: {exc}. {_OFFLINE_FIXES}"
        ) from exc


def _unreadable(data_files: DataFiles, builder: str, exc: Exception) -> str:
    """Why ``datasets`` could not read the local ``data_files`` as ``builder``, naming the files and the fix
    (its own error names neither: StopIteration has no message, DatasetGenerationError hides the parse error)."""
    files = [str(file) for file in _iter_files(data_files)]
    empty = [file for file in files if Path(file).stat().st_size == 0]
    if empty:
        return f"Local data file(s) {', '.join(empty)}: an empty file has no rows; give files with at least one row each."
    cause = exc.__cause__ or exc.__context__ or exc
    shape = "one JSON object per line" if builder == "json" else f"valid {builder}"
    return (
        f"Local data file(s) {', '.join(files)} could not be read as {builder}: {type(cause).__name__}: {str(cause):.300}. "
        f"Fix the file(s) ({shape}, with the columns the env reads)."
    )


_OFFLINE_FIXES = (
    "Without network: use the shipped sample (the same category's :Sample id, e.g. math:Sample), or pass a local "
    "copy, make(ENV_ID, data_files='path/to/rows.jsonl') (JSONL/Parquet/CSV with the same columns), or set "
    "HF_HUB_OFFLINE=1 with the dataset already in the Hugging Face cache (`gem list` shows which ids need hub data)."
)


def _readers(path: str) -> str:
    """``"math:GSM8K, math:GSM8K-python need "``: the registered ids that read the hub dataset ``path``."""
    from gem_core.registry import list_envs, spec

    ids = [env_id for env_id in list_envs() if spec(env_id).kwargs.get("dataset_path") == path]
    if not ids:
        return "This env needs "
    return f"{', '.join(ids)} need{'s' if len(ids) == 1 else ''} "


def _in_hf_cache(path: str) -> bool:
    """Whether the Hugging Face caches hold anything of the hub dataset ``path`` (then ``datasets`` may load
    it without network, after its retries, and no early refusal applies)."""
    from datasets import config
    from datasets.naming import camelcase_to_snakecase
    from huggingface_hub import constants

    *namespace, dataset = path.split("/")
    prepared = Path(config.HF_DATASETS_CACHE) / "___".join([*namespace, camelcase_to_snakecase(dataset)])
    downloaded = Path(constants.HF_HUB_CACHE) / ("datasets--" + path.replace("/", "--"))
    return prepared.is_dir() or downloaded.is_dir()


def _hub_unreachable() -> str | None:
    """Why the hub cannot be reached from here, by one TCP connect of at most :data:`HUB_PROBE_SECONDS`; None
    when it can, in offline mode (``datasets`` then reads its cache and fails at once by itself), or behind a
    proxy (the proxy decides what is reachable)."""
    from datasets import config

    if config.HF_HUB_OFFLINE:
        return None
    endpoint = urllib.parse.urlsplit(config.HF_ENDPOINT)
    proxies = urllib.request.getproxies()
    if endpoint.hostname is None or proxies.get(endpoint.scheme) or proxies.get("all"):
        return None
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((endpoint.hostname, port), timeout=HUB_PROBE_SECONDS).close()
    except OSError as exc:
        return f"{endpoint.hostname}:{port}: {exc.strerror or type(exc).__name__}"
    return None


def _iter_files(data_files: DataFiles):
    if isinstance(data_files, dict):
        for value in data_files.values():
            yield from _iter_files(value)
    elif isinstance(data_files, (str, os.PathLike)):
        yield data_files
    else:
        yield from data_files


def clear_cache() -> None:
    """Forget every loaded dataset (tests use this to check loading happens once)."""
    with _cache_lock:
        _cache.clear()


class DatasetEnv(Env):
    """An env whose episode is one dataset row (a question, a problem), drawn with the env's own RNG.

    Subclasses call ``super().__init__`` with where the rows come from and the columns they read, then
    :meth:`draw_row` in ``reset``. One answer ends the episode, so a malformed one does too.

    Args:
        dataset_path: see :func:`load_rows`.
        dataset_name: see :func:`load_rows`.
        split: see :func:`load_rows`.
        data_files: see :func:`load_rows`.
        fields: the constructor arguments that name columns, ``{"question_field": "problem", ...}``;
            a missing column is reported under the argument's name, so the fix is obvious.

    Raises:
        InvalidArgument: if the dataset split is empty or lacks a column the env reads, or a column name is empty.
        InvalidArgumentType: if a column name is not a str (None included).
    """

    terminate_on_format_error = True
    #: The rows are shared by every env reading the dataset; a snapshot keeps only which row is in play.
    state_excludes = frozenset({"rows"})

    def __init__(
        self,
        dataset_path: str | None,
        *,
        dataset_name: str | None,
        split: str,
        data_files: DataFiles | None,
        fields: dict[str, str],
    ):
        for argument, column in fields.items():  # checked first: '' or None only failed every reset, as a bare KeyError
            check_text(argument, column)
            if not column:
                raise InvalidArgument(f"{argument} is empty: name the dataset column it reads, e.g. {argument}='{argument.removesuffix('_field')}'.")
        self.rows = load_rows(dataset_path, split=split, name=dataset_name, data_files=data_files)
        missing = set(fields.values()) - set(self.rows.column_names)
        if missing:
            raise InvalidArgument(
                f"Dataset {dataset_path or data_files!r} has no column(s) {sorted(missing)}; its columns are "
                f"{self.rows.column_names}. Pass {'/'.join(f'{arg}=' for arg in fields)} naming the right ones."
            )
        if len(self.rows) == 0:
            raise InvalidArgument(f"Dataset {dataset_path or data_files!r} (split {split!r}) is empty.")
        self.index: int | None = None

    def draw_row(self, seed: int | None, options: dict[str, Any] | None) -> dict[str, Any]:
        """Seed :attr:`np_random` and pick this episode's row; ``options={"index": i}`` picks row ``i``."""
        super().reset(seed=seed)
        if options and "index" in options:
            self.index = check_index(options["index"], len(self.rows))
        else:
            self.index = int(self.np_random.integers(len(self.rows)))
        return self.rows[self.index]


def register_hub_datasets(
    category: str,
    entry_points: dict[str, str],
    sample_kwargs: dict[str, Any],
    hub_datasets: dict[str, tuple[Any, ...]],
    columns: Sequence[str],
    *,
    extras: Sequence[str] = (),
) -> None:
    """Register ``<category>:Sample`` (the shipped rows) and one id per hub dataset, in every variant.

    Each dataset env package (math, QA, code) keeps a table ``name -> (hub id, config, split, *columns)``;
    this turns a row into the env's keyword arguments, so the table stays the only thing a package writes.

    Args:
        category: the id's prefix, e.g. ``"math"``.
        entry_points: id suffix -> entry point, e.g. ``{"": "...:MathEnv", "-python": "...:make_math_with_python"}``.
        sample_kwargs: the shipped set's kwargs: ``<category>:Sample``'s own, and every id's ``sample_kwargs``.
        hub_datasets: id name -> (hub id, config, split, then one value per name in ``columns``).
        columns: the env's keyword names for the rest of each row, e.g. ``("question_field", "answer_field")``.
        extras: the pip extras every id needs (:attr:`gem_core.registry.EnvSpec.extras`), e.g. ``("math",)``.

    Raises:
        InvalidArgument: if a ``hub_datasets`` row does not hold one value per column.
    """
    from gem_core.registry import register

    keys = ("dataset_path", "dataset_name", "split", *columns)
    kwargs_by_name = {"Sample": sample_kwargs}
    for name, row in hub_datasets.items():
        if len(row) != len(keys):
            raise InvalidArgument(f"{category}:{name}: expected a row of {keys}, got {row!r}.")
        kwargs_by_name[name] = dict(zip(keys, row, strict=True))
    for name, kwargs in kwargs_by_name.items():
        for suffix, entry_point in entry_points.items():
            register(f"{category}:{name}{suffix}", entry_point, sample_kwargs=sample_kwargs, extras=extras, **kwargs)

"""Inputs: qrels and runs, their readers and writers."""

from rankwise.data.frames import qrels_from_frame, run_from_frame
from rankwise.data.load import load_qrels, load_run
from rankwise.data.qrels import Qrels
from rankwise.data.run import Run
from rankwise.data.tabular import (
    read_beir_qrels,
    read_delimited_run,
    read_jsonl_qrels,
    read_jsonl_run,
    write_jsonl_qrels,
    write_jsonl_run,
)
from rankwise.data.trec import read_trec_qrels, read_trec_run, write_trec_qrels, write_trec_run

__all__ = [
    "Qrels", "Run", "load_qrels", "load_run", "qrels_from_frame", "run_from_frame",
    "read_beir_qrels", "read_delimited_run", "read_jsonl_qrels", "read_jsonl_run", "read_trec_qrels",
    "read_trec_run", "write_jsonl_qrels", "write_jsonl_run", "write_trec_qrels", "write_trec_run",
]

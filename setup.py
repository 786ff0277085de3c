"""The one compiled piece of rankwise: rankwise/data/_walk.c, which reads ``{query: {doc: value}}``
dicts, groups and ranks a run's rows, joins them with the qrels, and scans a run file for what Arrow's
reader cannot split.

It is optional: where it cannot be built (no C compiler) rankwise installs without it and takes its
Python and numpy paths, which give the same results (tests/data/test_walk.py holds them equal).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("rankwise.data._walk", ["src/rankwise/data/_walk.c"], optional=True)])

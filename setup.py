"""The one compiled piece of rankwise: a C walk of ``{query: {doc: value}}`` dicts (rankwise/data/_walk.c).

It is optional: where it cannot be built (no C compiler) rankwise installs without it and reads dicts with
its pure-Python walk, which gives the same arrays (tests/data/test_walk.py holds the two equal).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("rankwise.data._walk", ["src/rankwise/data/_walk.c"], optional=True)])

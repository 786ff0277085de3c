"""The ``rankwise`` command line: one module per command group; each command parses its options,
calls one library function and prints. Heavy modules are imported inside each command, so ``rankwise
eval`` starts fast.
"""

from rankwise.cli import cache as _cache  # noqa: F401  (registers its commands)
from rankwise.cli import calibrate as _calibrate  # noqa: F401  (registers its commands)
from rankwise.cli import compare as _compare  # noqa: F401  (registers its commands)
from rankwise.cli import eval as _eval  # noqa: F401  (registers its commands)
from rankwise.cli import explain as _explain  # noqa: F401  (registers its commands)
from rankwise.cli import judge as _judge  # noqa: F401  (registers its commands)
from rankwise.cli import judge_check as _judge_check  # noqa: F401  (registers its commands)
from rankwise.cli import judge_retest as _judge_retest  # noqa: F401  (registers its commands)
from rankwise.cli import plan as _plan  # noqa: F401  (registers its commands)
from rankwise.cli import ppi as _ppi  # noqa: F401  (registers its commands)
from rankwise.cli import rag as _rag  # noqa: F401  (registers its commands)
from rankwise.cli import retrieval as _retrieval  # noqa: F401  (registers its commands)
from rankwise.cli import testsets as _testsets  # noqa: F401  (registers its commands)
from rankwise.cli import traces as _traces  # noqa: F401  (registers its commands)
from rankwise.cli import workflows as _workflows  # noqa: F401  (registers its commands)
from rankwise.cli._base import main

__all__ = ["main"]

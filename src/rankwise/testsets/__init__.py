"""Test sets made from a corpus (``synth``), completed by pooling (``pool``), and read from or
written for other tools (``importers``): every reference context is a character span of a corpus
document.

Example::

    from rankwise.testsets import synth, SynthSettings
    summary = synth("docs/", out="testset.jsonl", model="qwen2.5:7b", base_url="http://localhost:11434/v1",
                    settings=SynthSettings(n=200))
"""

from __future__ import annotations

from rankwise._lazy import lazy_exports

__all__ = ["synth", "SynthSettings", "SynthSummary", "estimate_synth", "plan_samples", "parse_styles",
           "locate", "normalise", "detect_language", "pool", "import_testset", "export_testset"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "synth": ".synth_run", "SynthSettings": ".synth_run", "SynthSummary": ".synth_run", "estimate_synth": ".synth_run",
    "plan_samples": ".synth_run", "parse_styles": ".synth_run", "locate": "rankwise.data.locate", "normalise": "rankwise.data.locate",
    "detect_language": ".language", "pool": ".pool_run", "import_testset": ".importers",
    "export_testset": ".importers",
}, globals())

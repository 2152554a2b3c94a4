"""Control: the microcoded sequencer (``sequencer.py``) and its ISA views (``layouts.py``)."""

"""The fault harness shared by the fault suite (``tests/faults/``) and the soak (``python -m bench.soak``):
a stage of real parts (``stage``), the faults (``kinds``), one run (``run.play``) and what it is judged on
(``tally``)."""
